// psctl dashboard's page: polls api/snapshot (ctl/cluster/cluster_snapshot.h's JSON) and
// api/history (ctl/dashboard/job_history.h: what psctl dashboard has seen of each job since it
// started, so a page opened mid-run starts with it) once a second, and draws the tasks, the
// jobs, and for every running or selected job its loss and examples/s per worker over time,
// each worker's staleness distribution and, for a traced job, its timeline (timeline.js). A failed poll is shown on the page and retried; nothing
// is thrown.
'use strict';

(function() {
const POLL_MS = 1000;
const CHART_HEIGHT = 220;
// Worker w's colour is PALETTE[w % PALETTE.length], in every chart.
const PALETTE = [
  '#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22'
];
const AXIS = {
  stroke: '#5f6368',
  grid: {stroke: '#eceff1', width: 1},
  ticks: {stroke: '#dadce0', width: 1}
};

let history = new Map();      // job_id -> {times: [s], workers: Map(worker -> {loss, eps})}
const cpuSeen = new Map();    // task -> {time_ms, cpu_seconds}: for CPU use between snapshots.
const selected = new Set();   // Jobs charted although not running.
const jobCharts = new Map();  // job_id -> {section, loss, eps, staleness}
let snapshots = 0;
let latest = null;

const $ = (id) => document.getElementById(id);

function workerColor(worker) {
  return PALETTE[worker % PALETTE.length];
}

function finite(value) {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

// `value` to `digits` significant digits ("0.0001234", "1.500e-7"), '' when not a number.
function formatSignificant(value, digits) {
  const number = finite(value);
  return number === null ? '' : number.toPrecision(digits);
}

// Labels for an axis's ticks `increment` apart: as many decimals as the increment needs, or
// powers of ten below 0.0001, where decimals would hide the differences.
function tickLabels(u, splits, axisIndex, space, increment) {
  const decimals = Math.max(0, -Math.floor(Math.log10(increment)));
  return splits.map((value) => {
    if (value === null) return '';
    if (decimals <= 4 || value === 0) {
      return value.toLocaleString(
          'en-US', {minimumFractionDigits: decimals, maximumFractionDigits: decimals});
    }
    const digits = Math.floor(Math.log10(Math.abs(value))) - Math.floor(Math.log10(increment));
    return value.toExponential(Math.min(6, Math.max(1, digits)));
  });
}

function formatNumber(value, digits) {
  const number = finite(value);
  return number === null ? '' : number.toFixed(digits);
}

function formatBytes(bytes) {
  const number = finite(bytes);
  if (number === null) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let scaled = number;
  let unit = 0;
  while (scaled >= 1024 && unit < units.length - 1) {
    scaled /= 1024;
    unit++;
  }
  return scaled.toFixed(unit === 0 ? 0 : 1) + ' ' + units[unit];
}

function formatDuration(seconds) {
  const number = finite(seconds);
  if (number === null) return '';
  if (number < 60) return number.toFixed(1) + ' s';
  const whole = Math.floor(number);
  const h = Math.floor(whole / 3600);
  const m = Math.floor((whole % 3600) / 60);
  const s = whole % 60;
  return (h > 0 ? h + 'h ' : '') + String(m).padStart(h > 0 ? 2 : 1, '0') + 'm ' +
      String(s).padStart(2, '0') + 's';
}

function showError(message) {
  const error = $('error');
  error.textContent = message;
  error.hidden = message === '';
}

// A table row of `cells`: each a string, or {text, className, title}.
function row(cells) {
  const tr = document.createElement('tr');
  for (const cell of cells) {
    const td = document.createElement('td');
    const spec = typeof cell === 'object' && cell !== null ? cell : {text: cell};
    td.textContent = spec.text === undefined || spec.text === null ? '' : String(spec.text);
    if (spec.className) td.className = spec.className;
    if (spec.title) td.title = spec.title;
    tr.appendChild(td);
  }
  return tr;
}

function renderTasks(snapshot) {
  const body = $('tasks').tBodies[0];
  body.replaceChildren();
  for (const task of snapshot.tasks || []) {
    let cpuUse = '';
    const seen = cpuSeen.get(task.task);
    if (task.up && seen && snapshot.time_ms > seen.time_ms) {
      const share =
          (task.cpu_seconds - seen.cpu_seconds) / ((snapshot.time_ms - seen.time_ms) / 1000);
      if (Number.isFinite(share) && share >= 0) cpuUse = (100 * share).toFixed(0) + ' %';
    }
    if (task.up) cpuSeen.set(task.task, {time_ms: snapshot.time_ms, cpu_seconds: task.cpu_seconds});
    // Long sentences (a down task's error, why a worker is on the CPU) are cut to fit; the
    // whole of each on hover.
    const down = 'down' + (task.error ? ': ' + task.error : '');
    const health = task.up ? {text: 'up', className: 'up'} :
                             {text: down, className: 'down long', title: down};
    const device = task.up ? task.device || '' : '';
    const tr = row([
      task.task,
      task.address,
      health,
      // The version's first word; the whole of it (commit, build) on hover.
      {text: task.up ? task.version.split(' ')[0] : '', title: task.up ? task.version : ''},
      // "cpu" of "cpu (auto: no usable GPU: ...)", "cuda:0" of "cuda:0 (NVIDIA ..., 80 GiB)".
      {text: device.split(' (')[0], title: device},
      {text: task.up ? task.pid : '', className: 'number'},
      {text: task.up ? formatDuration(task.uptime_seconds) : '', className: 'number'},
      {
        text: cpuUse,
        className: 'number',
        title: 'CPU time used per second since the last snapshot'
      },
      {text: task.up ? formatNumber(task.cpu_seconds, 1) + ' s' : '', className: 'number'},
      {text: task.up ? formatBytes(task.resident_bytes) : '', className: 'number'},
      {text: task.up ? task.threads : '', className: 'number'},
      {text: task.up && task.metrics_port > 0 ? task.metrics_port : '', className: 'number'},
    ]);
    tr.dataset.task = task.task;
    tr.dataset.up = task.up ? 'true' : 'false';
    body.appendChild(tr);
  }
}

// The job's figures for its row: step, examples/s and loss as psctl's progress line has them
// (the snapshot's, ctl/job/job_figures.h), the staleness over every gradient, barrier waits.
function jobSummary(job) {
  const workers = job.workers || [];
  const shards = job.shards || [];
  let stalenessWeighted = 0;
  let gradients = 0;
  let stalenessMax = null;
  for (const worker of workers) {
    const count = (worker.staleness_counts || []).reduce((a, b) => a + b, 0);
    const mean = finite(worker.staleness_mean);
    if (mean !== null && count > 0) {
      stalenessWeighted += mean * count;
      gradients += count;
    }
    const max = finite(worker.staleness_max);
    if (max !== null) stalenessMax = stalenessMax === null ? max : Math.max(stalenessMax, max);
  }
  const waits = new Map();  // worker -> longest wait (s)
  for (const shard of shards) {
    for (const worker of shard.waiting_for || []) {
      waits.set(worker, Math.max(waits.get(worker) || 0, finite(shard.oldest_wait_seconds) || 0));
    }
  }
  const waitText =
      [...waits.keys()]
          .sort((a, b) => a - b)
          .map((worker) => 'worker ' + worker + ' (' + waits.get(worker).toFixed(1) + ' s)')
          .join(', ');
  return {
    step: finite(job.step),
    examples: workers.some((worker) => (finite(worker.step) || 0) > 0) ?
        finite(job.examples_per_second) :
        null,
    loss: finite(job.loss),
    stalenessMean: gradients > 0 ? stalenessWeighted / gradients : null,
    stalenessMax: stalenessMax,
    waits: waitText,
  };
}

function renderJobs(snapshot) {
  const body = $('jobs').tBodies[0];
  body.replaceChildren();
  for (const job of snapshot.jobs || []) {
    const summary = jobSummary(job);
    const tr = row([
      job.job_id,
      {text: job.state, title: job.state_line},
      job.mode,
      {text: summary.step === null ? '' : summary.step, className: 'number'},
      {text: formatNumber(summary.examples, 0), className: 'number'},
      {text: formatSignificant(summary.loss, 4), className: 'number'},
      {text: formatNumber(summary.stalenessMean, 2), className: 'number'},
      {text: summary.stalenessMax === null ? '' : summary.stalenessMax, className: 'number'},
      {text: summary.waits, className: 'detail'},
    ]);
    tr.dataset.job = job.job_id;
    tr.dataset.state = job.state;
    tr.title = job.state_line || '';
    if (selected.has(job.job_id)) tr.classList.add('selected');
    tr.addEventListener('click', () => {
      if (selected.has(job.job_id))
        selected.delete(job.job_id);
      else
        selected.add(job.job_id);
      if (latest) render(latest);
    });
    body.appendChild(tr);
  }
}

// api/history's JSON as the charts take it.
function historyFrom(json) {
  const jobs = new Map();
  for (const [jobId, job] of Object.entries(json || {})) {
    const workers = new Map();
    for (const [worker, series] of Object.entries(job.workers || {})) {
      workers.set(Number(worker), {loss: series.loss || [], eps: series.examples_per_second || []});
    }
    jobs.set(jobId, {times: job.times || [], workers: workers});
  }
  return jobs;
}

function chartWidth(container) {
  return Math.max(300, container.clientWidth - 8);
}

// A uPlot chart in `holder`, made again when `key` (its series) changes, else given `data`. The
// chart's element says how many points each series has (data-points), for tests and tools.
function drawChart(holder, key, makeOptions, data) {
  holder.element.dataset.points =
      JSON.stringify(data.slice(1).map((series) => series.filter((v) => v != null).length));
  if (holder.plot && holder.key === key) {
    holder.plot.setData(data);
    return;
  }
  if (holder.plot) holder.plot.destroy();
  holder.element.replaceChildren();
  holder.key = key;
  holder.plot = new uPlot(makeOptions(chartWidth(holder.element)), data, holder.element);
}

function lineOptions(title, unit, workers) {
  return (width) => ({
           title: title,
           width: width,
           height: CHART_HEIGHT,
           scales: {x: {time: true}},
           series: [{label: 'time'}].concat(workers.map((worker) => ({
                                                          label: 'worker ' + worker,
                                                          stroke: workerColor(worker),
                                                          width: 2,
                                                          points: {show: false},
                                                        }))),
           axes: [
             Object.assign({}, AXIS),
             Object.assign({label: unit, size: 72, values: tickLabels}, AXIS),
           ],
           legend: {live: false},
         });
}

function drawLines(holder, past, field, title, unit) {
  const workers = [...past.workers.keys()].sort((a, b) => a - b);
  const data =
      [past.times.slice()].concat(workers.map((worker) => past.workers.get(worker)[field].slice()));
  drawChart(holder, workers.join(','), lineOptions(title, unit, workers), data);
}

// Each worker's share of its applied gradients by staleness (the last bucket: that many or
// more), as bars grouped by staleness: one x position per (bucket, worker).
function drawStaleness(holder, job) {
  const workers = (job.workers || []).slice().sort((a, b) => a.worker - b.worker);
  const buckets = Math.max(1, ...workers.map((worker) => (worker.staleness_counts || []).length));
  const width = 0.8 / Math.max(1, workers.length);
  const xs = [];
  const shares = workers.map(() => []);
  for (let bucket = 0; bucket < buckets; bucket++) {
    workers.forEach((worker, index) => {
      xs.push(bucket + (index - (workers.length - 1) / 2) * width);
      workers.forEach((other, otherIndex) => {
        if (otherIndex !== index) {
          shares[otherIndex].push(null);
          return;
        }
        const counts = worker.staleness_counts || [];
        const total = counts.reduce((a, b) => a + b, 0);
        shares[index].push(total > 0 ? 100 * (counts[bucket] || 0) / total : null);
      });
    });
  }
  const ids = workers.map((worker) => worker.worker);
  const labelEvery = Math.ceil(buckets / 16);
  const makeOptions =
      (chartWidthPx) =>
          (
              {
                title: 'Staleness of applied gradients',
                width: chartWidthPx,
                height: CHART_HEIGHT,
                scales: {
                  x: {time: false, range: [-0.5, buckets - 0.5]},
                  y: {range: (u, min, max) => [0, Math.max(10, Math.ceil((max || 0) / 10) * 10)]},
                },
                series: [{label: 'staleness'}].concat(
                    ids.map((worker) => ({
                              label: 'worker ' + worker,
                              stroke: workerColor(worker),
                              fill: workerColor(worker),
                              width: 1,
                              paths: uPlot.paths.bars({size: [0.9, 60], align: 0}),
                              points: {show: false},
                            }))),
                axes:
                    [
                      Object.assign(
                          {
                            label: 'staleness (versions behind)',
                            // At most 16 labels, the last bucket's always.
                            splits: () => Array.from({length: buckets}, (_, bucket) => bucket)
                                              .filter((bucket) => bucket % labelEvery === 0 ||
                                                          bucket === buckets - 1),
                            values: (u, splits) => splits.map(
                                (bucket) => bucket === buckets - 1 && buckets > 1 ?
                                    '\u2265' + bucket :
                                    String(bucket)),
                          },
                          AXIS),
                      Object.assign({label: '% of gradients', size: 64}, AXIS),
                    ],
                legend: {live: false},
                cursor: {show: false},
              });
  drawChart(holder, ids.join(',') + '/' + buckets, makeOptions, [xs].concat(shares));
}

function newJobCharts(jobId) {
  const section = document.createElement('section');
  section.className = 'job-charts';
  section.dataset.job = jobId;
  const heading = document.createElement('h3');
  section.appendChild(heading);
  const grid = document.createElement('div');
  grid.className = 'charts';
  section.appendChild(grid);
  const holder = (kind) => {
    const element = document.createElement('div');
    element.className = 'chart';
    element.dataset.chart = kind;
    grid.appendChild(element);
    return {element: element, plot: null, key: null};
  };
  return {
    section: section,
    heading: heading,
    loss: holder('loss'),
    eps: holder('examples_per_second'),
    staleness: holder('staleness'),
    timeline: null,  // Made when the job's snapshot first has a timeline (timeline.js).
  };
}

// A traced job's timeline below its charts (timeline.js), the section's width.
function drawTimeline(charts, job) {
  if (!job.timeline) return;
  if (!charts.timeline) charts.timeline = Timeline.create(charts.section);
  charts.timeline.job = job;
  Timeline.draw(charts.timeline, job.timeline, chartWidth(charts.section));
}

function renderCharts(snapshot) {
  const shown = new Set();
  const container = $('charts');
  for (const job of snapshot.jobs || []) {
    if (job.state !== 'RUNNING' && !selected.has(job.job_id)) continue;
    const past = history.get(job.job_id);
    if (!past) continue;
    shown.add(job.job_id);
    let charts = jobCharts.get(job.job_id);
    if (!charts) {
      charts = newJobCharts(job.job_id);
      jobCharts.set(job.job_id, charts);
    }
    container.appendChild(charts.section);  // Keeps the sections in the snapshot's order.
    charts.heading.textContent = 'Job ' + job.job_id + ' (' + job.state + ', ' + job.mode + ')';
    drawLines(charts.loss, past, 'loss', 'Training loss', 'loss');
    drawLines(charts.eps, past, 'eps', 'Examples per second', 'examples/s');
    drawStaleness(charts.staleness, job);
    drawTimeline(charts, job);
  }
  for (const [jobId, charts] of jobCharts) {
    if (shown.has(jobId)) continue;
    for (const holder of [charts.loss, charts.eps, charts.staleness]) {
      if (holder.plot) holder.plot.destroy();
    }
    charts.section.remove();
    jobCharts.delete(jobId);
  }
}

function render(snapshot) {
  renderTasks(snapshot);
  renderJobs(snapshot);
  renderCharts(snapshot);
}

function resizeCharts() {
  for (const charts of jobCharts.values()) {
    for (const holder of [charts.loss, charts.eps, charts.staleness]) {
      if (holder.plot) {
        holder.plot.setSize({width: chartWidth(holder.element), height: CHART_HEIGHT});
      }
    }
    if (charts.timeline) drawTimeline(charts, charts.timeline.job);
  }
}

async function poll() {
  let snapshot;
  try {
    const [response, past] = await Promise.all(
        ['api/snapshot', 'api/history'].map((path) => fetch(path, {cache: 'no-store'})));
    for (const answer of [response, past]) {
      if (!answer.ok) throw new Error('HTTP ' + answer.status + ' ' + answer.statusText);
    }
    snapshot = await response.json();
    history = historyFrom(await past.json());
  } catch (error) {
    showError(
        'Cannot read the cluster\'s snapshot from psctl dashboard (' + error.message +
        '); trying again every second.');
    setTimeout(poll, POLL_MS);
    return;
  }
  try {
    render(snapshot);
    latest = snapshot;
    snapshots++;
    const status = $('status');
    status.dataset.snapshots = String(snapshots);
    status.textContent = 'snapshot of ' + new Date(snapshot.time_ms).toLocaleTimeString() + ' (' +
        snapshots + ' since this page opened; one a second)';
    showError('');
  } catch (error) {
    showError('Cannot show the cluster\'s snapshot: ' + error.message);
  }
  setTimeout(poll, POLL_MS);
}

let resizeTimer = null;
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(resizeCharts, 200);
});
poll();
})();
