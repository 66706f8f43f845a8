// Opens psctl dashboard's page in headless Chromium, driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: no port, no packages), and checks what a person would see once the
// page has polled for a while:
//  - no console error, no uncaught exception, no error in Chromium's log, no failed load;
//  - every request went to the dashboard itself (and any host name other than the dashboard's
//    fails to resolve, so a reference to the internet would show as a failed load);
//  - the tasks table lists exactly the expected tasks, each up; the jobs table has the job,
//    RUNNING, with its step (a whole number above 0); the page shows no error and fits a
//    window 1280 px wide; its first charts hold psctl dashboard's samples from before it
//    opened;
//  - for the job, the loss, examples/s and staleness charts each draw every worker's series:
//    each series holds data (the page's points per series, data-points on the chart) and the
//    screenshot holds at least --min_pixels pixels of the series' colours (read from the chart's
//    legend) inside that chart's canvas for every series, counted together: two workers' lines
//    at the same values overlap, and the one drawn last hides the other. An empty chart fails;
//  - with --timeline (the job is traced): its timeline has a row for each of those tasks, each
//    with spans drawn, and the screenshot holds --min_pixels pixels of a worker's compute spans'
//    colour and of a shard's applies' in the timeline's canvas.
// Writes dashboard.png (the screenshot), dashboard.html (the DOM), console.txt and requests.txt
// to --out. Exit status 0 when every check passes, 1 otherwise (each failure printed).
//
// node dashboard_chromium_check.js --chromium=PATH --url=URL --out=DIR --tasks=ps:0,worker:0
//     --job=ID --workers=N [--timeline=ps:0,worker:0] [--min_snapshots=8] [--min_pixels=40]
//     [--timeout_s=60] [--no_sandbox]
'use strict';

const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const zlib = require('zlib');

// The window's width: a laptop's screen. The page must fit it.
const WIDTH = 1280;

function parseFlags(argv) {
  const flags = {min_snapshots: '8', min_pixels: '40', timeout_s: '60'};
  for (const arg of argv) {
    const match = /^--([a-z_]+)(?:=(.*))?$/.exec(arg);
    if (!match) throw new Error('unexpected argument ' + arg);
    flags[match[1]] = match[2] === undefined ? 'true' : match[2];
  }
  for (const required of ['chromium', 'url', 'out', 'tasks', 'job', 'workers']) {
    if (!flags[required]) throw new Error('--' + required + ' is required');
  }
  return flags;
}

// A DevTools protocol client over Chromium's pipe: messages are JSON, each ended by a NUL byte.
class DevTools {
  constructor(input, output) {
    this.input = input;
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = [];
    let buffered = '';
    output.on('data', (chunk) => {
      buffered += chunk.toString('utf8');
      let end;
      while ((end = buffered.indexOf('\0')) >= 0) {
        const message = JSON.parse(buffered.slice(0, end));
        buffered = buffered.slice(end + 1);
        if (message.id !== undefined && this.pending.has(message.id)) {
          const {resolve, reject, method} = this.pending.get(message.id);
          this.pending.delete(message.id);
          if (message.error)
            reject(new Error(method + ': ' + message.error.message));
          else
            resolve(message.result);
        } else if (message.method) {
          for (const listener of this.listeners) listener(message);
        }
      }
    });
  }

  send(method, params = {}, sessionId = undefined) {
    const id = this.nextId++;
    const message = {id, method, params};
    if (sessionId) message.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, {resolve, reject, method});
      this.input.write(JSON.stringify(message) + '\0');
    });
  }

  on(listener) {
    this.listeners.push(listener);
  }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('timed out after ' + ms + ' ms: ' + what)), ms);
    }),
  ]);
}

// The RGBA pixels of an 8-bit RGB or RGBA PNG without interlacing (what Chromium writes).
function decodePng(bytes) {
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  if (!bytes.subarray(0, 8).equals(signature)) throw new Error('not a PNG');
  let offset = 8;
  let width = 0, height = 0, colorType = 0;
  const data = [];
  while (offset < bytes.length) {
    const length = bytes.readUInt32BE(offset);
    const type = bytes.toString('latin1', offset + 4, offset + 8);
    const body = bytes.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      const bitDepth = body[8];
      colorType = body[9];
      if (bitDepth !== 8 || (colorType !== 2 && colorType !== 6) || body[12] !== 0) {
        throw new Error('PNG: only 8-bit RGB(A) without interlacing is read here');
      }
    } else if (type === 'IDAT') {
      data.push(body);
    }
    offset += 12 + length;
  }
  const channels = colorType === 6 ? 4 : 3;
  const raw = zlib.inflateSync(Buffer.concat(data));
  const stride = width * channels;
  const pixels = Buffer.alloc(width * height * 4);
  let previous = Buffer.alloc(stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = Buffer.from(raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)));
    for (let i = 0; i < stride; i++) {
      const left = i >= channels ? line[i - channels] : 0;
      const up = previous[i];
      const upLeft = i >= channels ? previous[i - channels] : 0;
      let predictor = 0;
      if (filter === 1)
        predictor = left;
      else if (filter === 2)
        predictor = up;
      else if (filter === 3)
        predictor = (left + up) >> 1;
      else if (filter === 4) {
        const p = left + up - upLeft;
        const pa = Math.abs(p - left), pb = Math.abs(p - up), pc = Math.abs(p - upLeft);
        predictor = pa <= pb && pa <= pc ? left : pb <= pc ? up : upLeft;
      }
      line[i] = (line[i] + predictor) & 0xff;
    }
    for (let x = 0; x < width; x++) {
      for (let c = 0; c < 3; c++) pixels[(y * width + x) * 4 + c] = line[x * channels + c];
      pixels[(y * width + x) * 4 + 3] = channels === 4 ? line[x * channels + 3] : 255;
    }
    previous = line;
  }
  return {width, height, pixels};
}

// Pixels within `rect` (CSS pixels = image pixels at scale 1) whose colour is within `tolerance`
// of `rgb` in every channel.
function countColor(image, rect, rgb, tolerance) {
  let count = 0;
  const x0 = Math.max(0, Math.floor(rect.x)),
        x1 = Math.min(image.width, Math.ceil(rect.x + rect.width));
  const y0 = Math.max(0, Math.floor(rect.y)),
        y1 = Math.min(image.height, Math.ceil(rect.y + rect.height));
  for (let y = y0; y < y1; y++) {
    for (let x = x0; x < x1; x++) {
      const at = (y * image.width + x) * 4;
      if (Math.abs(image.pixels[at] - rgb[0]) <= tolerance &&
          Math.abs(image.pixels[at + 1] - rgb[1]) <= tolerance &&
          Math.abs(image.pixels[at + 2] - rgb[2]) <= tolerance) {
        count++;
      }
    }
  }
  return count;
}

// The timeline of a traced job (ctl/dashboard/timeline.js): a row per task of `tasks`, each with
// spans drawn, and `minPixels` of the workers' spans' colours and of the shards' applies' in its
// canvas; `fail` is told what is wrong. (A fast job's thousands of steps in the window overlap:
// a pixel shows whichever of its spans was drawn last.)
function checkTimeline(timeline, tasks, image, minPixels, fail) {
  if (!timeline || !timeline.rect) {
    fail('the traced job has no timeline');
    return;
  }
  const rows = timeline.tasks.slice().sort().join(',');
  if (rows !== tasks.slice().sort().join(','))
    fail('the timeline\'s rows are ' + timeline.tasks.join(',') + ', not ' + tasks.join(','));
  timeline.tasks.forEach((task, index) => {
    if (!(timeline.spans[index] > 0)) fail('the timeline draws no span for ' + task);
  });
  // timeline.js's COLORS: pull #4e79a7, compute #59a14f, push #f28e2b, wait #e15759; apply
  // #76b7b2, drawn at 80% over a light row.
  const steps = [[0x4e, 0x79, 0xa7], [0x59, 0xa1, 0x4f], [0xf2, 0x8e, 0x2b], [0xe1, 0x57, 0x59]]
                    .reduce((sum, rgb) => sum + countColor(image, timeline.rect, rgb, 30), 0);
  const apply = countColor(image, timeline.rect, [0x76, 0xb7, 0xb2], 40);
  if (steps < minPixels || apply < minPixels)
    fail('the timeline holds ' + steps + ' px of workers\' spans and ' + apply + ' px of applies');
  console.log('timeline: ' + timeline.tasks.map((task, i) => task + ' ' + timeline.spans[i] +
      ' spans').join(', ') + '; ' + steps + ' px of workers\' spans, ' + apply + ' px of applies');
}

// What the page shows, read in the page: its status, tables, error and charts.
const READ_PAGE = `(() => {
  const rows = (id) => [...document.querySelectorAll('#' + id + ' tbody tr')];
  const box = (element) => {
    const rect = element ? element.getBoundingClientRect() : null;
    return rect && {x: rect.x + window.scrollX, y: rect.y + window.scrollY,
                    width: rect.width, height: rect.height};
  };
  const charts = [...document.querySelectorAll('.job-charts')].map((section) => ({
    job: section.dataset.job,
    timeline: [...section.querySelectorAll('.timeline')].map((timeline) => ({
      tasks: JSON.parse(timeline.dataset.tasks || '[]'),
      spans: JSON.parse(timeline.dataset.spans || '[]'),
      rect: box(timeline.querySelector('canvas')),
    }))[0] || null,
    charts: [...section.querySelectorAll('.chart')].map((chart) => {
      const canvas = chart.querySelector('canvas');
      const rect = canvas ? canvas.getBoundingClientRect() : null;
      return {
        kind: chart.dataset.chart,
        points: JSON.parse(chart.dataset.points || '[]'),
        rect: rect && {x: rect.x + window.scrollX, y: rect.y + window.scrollY,
                       width: rect.width, height: rect.height},
        series: [...chart.querySelectorAll('.u-legend .u-series')]
            .filter((series) => series.querySelector('.u-marker'))
            .map((series) => ({
              label: series.querySelector('.u-label').textContent,
              color: getComputedStyle(series.querySelector('.u-marker')).borderTopColor,
            })),
      };
    }),
  }));
  const status = document.getElementById('status');
  const error = document.getElementById('error');
  return JSON.stringify({
    snapshots: Number(status.dataset.snapshots),
    status: status.textContent,
    error: error.hidden ? '' : error.textContent,
    tasks: rows('tasks').map((tr) => ({task: tr.dataset.task, up: tr.dataset.up,
                                       text: tr.innerText.replace(/\\s+/g, ' ')})),
    jobs: rows('jobs').map((tr) => ({job: tr.dataset.job, state: tr.dataset.state,
                                     step: tr.cells[3].textContent,
                                     text: tr.innerText.replace(/\\s+/g, ' ')})),
    charts: charts,
    height: document.documentElement.scrollHeight,
    width: document.documentElement.scrollWidth,
  });
})()`;

async function main() {
  const flags = parseFlags(process.argv.slice(2));
  const expectedTasks = flags.tasks.split(',');
  const workers = Number(flags.workers);
  const minPixels = Number(flags.min_pixels);
  const deadline = Date.now() + 1000 * Number(flags.timeout_s);
  const origin = new URL(flags.url).origin;
  fs.mkdirSync(flags.out, {recursive: true});
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'dashboard-chromium-'));
  const failures = [];
  const fail = (message) => failures.push(message);
  const consoleLines = [];
  const requests = [];

  const args = [
    '--headless',
    '--remote-debugging-pipe',
    '--user-data-dir=' + profile,
    '--no-first-run',
    '--no-default-browser-check',
    '--disable-background-networking',
    '--disable-extensions',
    '--disable-sync',
    '--disable-component-update',
    '--hide-scrollbars',
    '--mute-audio',
    // Every host name but the dashboard's fails to resolve: nothing can come from elsewhere.
    '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE ' + new URL(flags.url).hostname,
  ];
  if (flags.no_sandbox === 'true') args.push('--no-sandbox');
  args.push('about:blank');
  const chromium = childProcess.spawn(
      flags.chromium, args, {stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe']});
  let chromiumLog = '';
  chromium.stderr.on('data', (chunk) => {
    chromiumLog += chunk.toString('utf8');
  });
  const exited =
      new Promise((resolve) => chromium.on('exit', (code, signal) => resolve({code, signal})));
  chromium.on('error', (error) => fail('cannot start ' + flags.chromium + ': ' + error.message));
  const devtools = new DevTools(chromium.stdio[3], chromium.stdio[4]);

  let image = null;
  try {
    const {targetId} = await withTimeout(
        devtools.send('Target.createTarget', {url: 'about:blank'}), 30000,
        'Chromium to open a page');
    const {sessionId} = await devtools.send('Target.attachToTarget', {targetId, flatten: true});
    const page = (method, params) => devtools.send(method, params, sessionId);
    let loaded = null;
    const loadFired = new Promise((resolve) => {
      loaded = resolve;
    });
    devtools.on((message) => {
      if (message.sessionId !== sessionId) return;
      const params = message.params || {};
      switch (message.method) {
        case 'Runtime.consoleAPICalled': {
          const text = (params.args || [])
                           .map(
                               (arg) => arg.value !== undefined ? String(arg.value) :
                                                                  arg.description || arg.type)
                           .join(' ');
          consoleLines.push('console.' + params.type + ': ' + text);
          if (params.type === 'error' || params.type === 'assert')
            fail('console.' + params.type + ': ' + text);
          break;
        }
        case 'Runtime.exceptionThrown': {
          const details = params.exceptionDetails || {};
          const text = (details.exception && details.exception.description) || details.text;
          consoleLines.push('exception: ' + text);
          fail('uncaught exception: ' + text);
          break;
        }
        case 'Log.entryAdded': {
          const entry = params.entry || {};
          consoleLines.push(
              'log.' + entry.level + ' (' + entry.source + '): ' + entry.text +
              (entry.url ? ' ' + entry.url : ''));
          if (entry.level === 'error')
            fail('Chromium logged an error: ' + entry.text + ' ' + (entry.url || ''));
          break;
        }
        case 'Network.requestWillBeSent': {
          const url = params.request.url;
          requests.push(params.request.method + ' ' + url);
          const local = url.startsWith(origin + '/') || /^(data|about|blob):/.test(url);
          if (!local) fail('the page requested ' + url + ', which is not the dashboard');
          break;
        }
        case 'Network.loadingFailed':
          fail('a load failed: ' + params.errorText + ' (request ' + params.requestId + ')');
          break;
        case 'Page.loadEventFired':
          loaded();
          break;
      }
    });
    await page('Runtime.enable');
    await page('Log.enable');
    await page('Network.enable');
    await page('Page.enable');
    await page(
        'Emulation.setDeviceMetricsOverride',
        {width: WIDTH, height: 1100, deviceScaleFactor: 1, mobile: false});
    const navigated = await page('Page.navigate', {url: flags.url});
    if (navigated.errorText)
      throw new Error('cannot open ' + flags.url + ': ' + navigated.errorText);
    await withTimeout(loadFired, 30000, 'the page to load');

    // Wait until the page has polled enough snapshots of the job running to draw its history.
    const read = async () =>
        JSON.parse((await page('Runtime.evaluate', {expression: READ_PAGE, returnByValue: true}))
                       .result.value);
    let shown = await read();
    let runningSince = null;
    let historyChecked = false;
    while (Date.now() < deadline) {
      // The first charts drawn hold psctl dashboard's samples from before the page opened:
      // more points than the page has polled snapshots.
      const section = shown.charts.find((charts) => charts.job === flags.job);
      const loss = section && section.charts.find((chart) => chart.kind === 'loss');
      if (!historyChecked && loss && shown.snapshots >= 1) {
        historyChecked = true;
        const most = Math.max(0, ...loss.points);
        if (most <= shown.snapshots)
          fail('the loss chart started with ' + most + ' points after ' + shown.snapshots +
               ' snapshots: not the history from before the page opened');
        else
          console.log('history: ' + most + ' points after ' + shown.snapshots + ' snapshots');
      }
      const job = shown.jobs.find((row) => row.job === flags.job);
      if (job && job.state === 'RUNNING' && runningSince === null) runningSince = shown.snapshots;
      if (runningSince !== null && shown.snapshots - runningSince >= Number(flags.min_snapshots))
        break;
      await sleep(500);
      shown = await read();
    }
    if (runningSince === null || shown.snapshots - runningSince < Number(flags.min_snapshots)) {
      fail(
          'the page did not show ' + flags.min_snapshots + ' snapshots of job ' + flags.job +
          ' RUNNING within ' + flags.timeout_s + ' s: ' + JSON.stringify(shown));
    }
    // The whole page in one screenshot.
    await page(
        'Emulation.setDeviceMetricsOverride',
        {width: WIDTH, height: Math.max(1100, shown.height), deviceScaleFactor: 1, mobile: false});
    await sleep(300);
    shown = await read();
    const screenshot =
        Buffer.from((await page('Page.captureScreenshot', {format: 'png'})).data, 'base64');
    fs.writeFileSync(path.join(flags.out, 'dashboard.png'), screenshot);
    const dom = await page(
        'Runtime.evaluate',
        {expression: 'document.documentElement.outerHTML', returnByValue: true});
    fs.writeFileSync(path.join(flags.out, 'dashboard.html'), dom.result.value);
    image = decodePng(screenshot);
    console.log('page: ' + shown.status);

    // The tables.
    if (shown.error) fail('the page shows an error: ' + shown.error);
    const tasks = shown.tasks.map((row) => row.task);
    if (JSON.stringify(tasks) !== JSON.stringify(expectedTasks)) {
      fail(
          'the tasks table lists ' + JSON.stringify(tasks) + ', expected ' +
          JSON.stringify(expectedTasks));
    }
    for (const row of shown.tasks) {
      if (row.up !== 'true' || !/ up /.test(' ' + row.text + ' '))
        fail('task not shown up: ' + row.text);
      else
        console.log('task row: ' + row.text);
    }
    if (shown.width > WIDTH)  // Everything in view on a laptop's screen, nothing pushed off it.
      fail('the page is ' + shown.width + ' px wide, wider than the window\'s ' + WIDTH + ' px');
    const jobRow = shown.jobs.find((row) => row.job === flags.job);
    if (!jobRow)
      fail('the jobs table has no row for job ' + flags.job + ': ' + JSON.stringify(shown.jobs));
    else if (!/^[1-9][0-9]*$/.test(jobRow.step))  // The job's step (ctl/job/job_figures.h).
      fail('the job row\'s Step is "' + jobRow.step + '", not a step: ' + jobRow.text);
    else
      console.log('job row: ' + jobRow.text);

    // The charts, by the colours of their series in the screenshot.
    const section = shown.charts.find((charts) => charts.job === flags.job);
    if (!section) {
      fail('no charts for job ' + flags.job);
    } else {
      const kinds = section.charts.map((chart) => chart.kind).join(',');
      if (kinds !== 'loss,examples_per_second,staleness') fail('the job\'s charts are ' + kinds);
      for (const chart of section.charts) {
        if (!chart.rect) {
          fail(chart.kind + ' chart: no canvas');
          continue;
        }
        if (chart.series.length !== workers) {
          fail(
              chart.kind + ' chart: ' + chart.series.length + ' series, expected one per worker (' +
              workers + ')');
        }
        const counts = [];
        let total = 0;
        chart.series.forEach((series, index) => {
          const rgb = (series.color.match(/\d+/g) || []).slice(0, 3).map(Number);
          const pixels = rgb.length === 3 ? countColor(image, chart.rect, rgb, 40) : 0;
          const points = chart.points[index] || 0;
          total += pixels;
          counts.push(series.label + ' ' + series.color + ': ' + pixels + ' px, ' + points +
                      ' points');
          if (points < 2) {
            fail(chart.kind + ' chart: ' + series.label + ' has ' + points +
                 ' data points (at least 2 expected): nothing to draw?');
          }
        });
        if (total < minPixels * chart.series.length) {
          fail(chart.kind + ' chart: ' + total + ' pixels of its series\' colours (at least ' +
               minPixels * chart.series.length + ' expected): nothing drawn?');
        }
        console.log(chart.kind + ' chart: ' + counts.join(', '));
      }
      if (flags.timeline) {
        checkTimeline(section.timeline, flags.timeline.split(','), image, minPixels, fail);
      }
    }
    await devtools.send('Browser.close').catch(() => {});
  } catch (error) {
    fail(error.message);
  } finally {
    fs.writeFileSync(path.join(flags.out, 'console.txt'), consoleLines.join('\n') + '\n');
    fs.writeFileSync(path.join(flags.out, 'requests.txt'), requests.join('\n') + '\n');
    const stopped = await Promise.race([exited, sleep(10000).then(() => null)]);
    if (stopped === null) {
      chromium.kill('SIGKILL');
      await exited;
    }
    fs.writeFileSync(path.join(flags.out, 'chromium.log'), chromiumLog);
    fs.rmSync(profile, {recursive: true, force: true});
  }
  console.log(
      'requests: ' + requests.length + ' (requests.txt); console messages: ' + consoleLines.length +
      ' (console.txt)');
  if (failures.length > 0) {
    for (const failure of failures) console.log('FAILED: ' + failure);
    process.exit(1);
  }
  console.log('PASSED');
}

main().catch((error) => {
  console.log('FAILED: ' + error.stack);
  process.exit(1);
});
