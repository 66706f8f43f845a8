// The status page's timeline of a traced job (JobSpec.trace): the last seconds of every task's
// trace, as api/snapshot's job "timeline" has them (ctl/cluster/cluster_snapshot.h), one row a
// task on a canvas, each span coloured by its kind. Hovering a span names it (the canvas's
// title). The element carries what it drew for tests: data-tasks (the rows' task names) and
// data-spans (the spans drawn per row).
'use strict';

const Timeline = (function() {
const ROW_HEIGHT = 22;
const LABEL_WIDTH = 120;
const AXIS_HEIGHT = 22;
// By kind, as TraceEvent's names in lower case.
const COLORS = {
  pull: '#4e79a7',
  compute: '#59a14f',
  straggle: '#bab0ac',
  push: '#f28e2b',
  wait: '#e15759',
  evaluate: '#b07aa1',
  apply: '#76b7b2',
  accumulate: '#edc948',
  drop: '#000000',
};

// A holder for one job's timeline in `parent`: a heading, the legend and the canvas.
function create(parent) {
  const element = document.createElement('div');
  element.className = 'timeline';
  const heading = document.createElement('h4');
  element.appendChild(heading);
  const legend = document.createElement('div');
  legend.className = 'timeline-legend';
  for (const [kind, color] of Object.entries(COLORS)) {
    const item = document.createElement('span');
    const swatch = document.createElement('i');
    swatch.style.background = color;
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(kind));
    legend.appendChild(item);
  }
  element.appendChild(legend);
  const canvas = document.createElement('canvas');
  element.appendChild(canvas);
  parent.appendChild(element);
  const holder = {element: element, heading: heading, canvas: canvas, boxes: []};
  canvas.addEventListener('mousemove', (event) => {
    const rect = canvas.getBoundingClientRect();
    const x = event.clientX - rect.left;
    const y = event.clientY - rect.top;
    // The innermost (last drawn) span under the pointer.
    let found = '';
    for (const box of holder.boxes) {
      if (x >= box.x && x <= box.x + Math.max(box.width, 2) && y >= box.y &&
          y <= box.y + box.height) {
        found = box.text;
      }
    }
    canvas.title = found;
  });
  return holder;
}

function describe(task, kinds, span) {
  const [kind, , durationMs, step, staleness] = span;
  let text = task + ': ' + kinds[kind] + ', step ' + step;
  if (kinds[kind] !== 'drop') text += ', ' + durationMs.toFixed(2) + ' ms';
  if (task.startsWith('ps') && kinds[kind] !== 'pull') text += ', staleness ' + staleness;
  return text;
}

// Draws `timeline` ({window_ms, kinds, rows: [{task, spans: [[kind, start_ms, duration_ms,
// step, staleness, worker]]}]}) into `holder`, `width` CSS pixels wide.
function draw(holder, timeline, width) {
  const rows = timeline.rows || [];
  const kinds = timeline.kinds || [];
  const windowMs = Math.max(1, timeline.window_ms || 1);
  const height = AXIS_HEIGHT + ROW_HEIGHT * rows.length;
  const ratio = window.devicePixelRatio || 1;
  const canvas = holder.canvas;
  canvas.style.width = width + 'px';
  canvas.style.height = height + 'px';
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const context = canvas.getContext('2d');
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.clearRect(0, 0, width, height);
  context.font = '12px sans-serif';
  context.textBaseline = 'middle';
  const plotWidth = Math.max(1, width - LABEL_WIDTH);
  const xOf = (ms) => LABEL_WIDTH + (ms / windowMs) * plotWidth;
  holder.heading.textContent = 'Timeline: the last ' +
      (windowMs >= 1000 ? (windowMs / 1000).toFixed(1) + ' s' : windowMs.toFixed(0) + ' ms') +
      ' of each task\'s trace (at most 10 s, at least each worker\'s last 50 steps)';
  holder.boxes = [];
  const drawn = [];
  rows.forEach((row, index) => {
    const top = index * ROW_HEIGHT;
    context.fillStyle = index % 2 ? '#ffffff' : '#f8f9fa';
    context.fillRect(0, top, width, ROW_HEIGHT);
    context.fillStyle = '#202124';
    context.fillText(row.task, 4, top + ROW_HEIGHT / 2);
    let count = 0;
    for (const span of row.spans || []) {
      const [kind, startMs, durationMs] = span;
      const name = kinds[kind] || '';
      const x = xOf(startMs);
      const spanWidth = Math.max(1, (durationMs / windowMs) * plotWidth);
      // A wait lies in the lower half of its pull or push; a drop is a tick.
      const inner = name === 'wait';
      const y = top + (inner ? ROW_HEIGHT / 2 : 3);
      const spanHeight = inner ? ROW_HEIGHT / 2 - 3 : ROW_HEIGHT - 6;
      context.fillStyle = COLORS[name] || '#9aa0a6';
      context.globalAlpha = row.task.startsWith('ps') ? 0.8 : 1;
      context.fillRect(x, y, name === 'drop' ? 2 : spanWidth, spanHeight);
      context.globalAlpha = 1;
      holder.boxes.push({x: x, y: y, width: spanWidth, height: spanHeight,
                         text: describe(row.task, kinds, span)});
      ++count;
    }
    drawn.push(count);
  });
  // The axis: seconds before the newest event.
  const axisTop = rows.length * ROW_HEIGHT;
  context.strokeStyle = '#dadce0';
  context.beginPath();
  context.moveTo(LABEL_WIDTH, axisTop + 0.5);
  context.lineTo(width, axisTop + 0.5);
  context.stroke();
  context.fillStyle = '#5f6368';
  // About ten ticks: 1, 2 or 5 times a power of ten of milliseconds apart.
  const rough = windowMs / 10;
  const power = Math.pow(10, Math.floor(Math.log10(rough)));
  const stepMs = [1, 2, 5, 10].map((m) => m * power).find((step) => step >= rough);
  for (let ms = 0; ms <= windowMs; ms += stepMs) {
    const x = xOf(windowMs - ms);
    context.fillRect(x, axisTop, 1, 4);
    const label = ms === 0 ? 'last event' :
        '\u2212' + (stepMs >= 1000 ? ms / 1000 + ' s' : Number(ms.toPrecision(6)) + ' ms');
    context.textAlign = ms === 0 ? 'right' : 'center';
    context.fillText(label, Math.min(x, width - 1), axisTop + AXIS_HEIGHT / 2 + 2);
  }
  context.textAlign = 'left';
  holder.element.dataset.tasks = JSON.stringify(rows.map((row) => row.task));
  holder.element.dataset.spans = JSON.stringify(drawn);
}

return {create: create, draw: draw};
})();
