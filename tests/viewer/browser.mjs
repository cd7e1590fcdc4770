// The viewer's outputs opened by software nobody here wrote: Debian's Chromium, driven headless by
// playwright-core (build/node, from .ci/deps --browser). Prints one JSON line for
// tests/e2e/test_viewer.py to judge.
//
//   node tests/viewer/browser.mjs devtools TRACE [PNG]
//     loads TRACE (.json or .json.gz) into Chromium's own DevTools Performance panel
//     (devtools://devtools/bundled/trace_app.html) and prints what its trace model holds: each
//     process with its name and threads (name, entries), and the flows; or {"loaded": false} with
//     what DevTools showed when it refused the file. PNG: a screenshot of the panel.
//   node tests/viewer/browser.mjs flows TRACE PNG RANK
//     the same, then a picture for the docs (tools/screenshots.sh): the ranks' training threads,
//     steps and the critical path expanded, the other threads hidden, the last collective of RANK
//     (the straggler) selected so that DevTools draws its flows to the ranks that waited for it.
//   node tests/viewer/browser.mjs page HTML PNG
//     opens HTML (report --html) and prints what the page holds and every request it made, and
//     saves a full-page screenshot to PNG.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const require = createRequire(path.join(process.env.DDPSPY_NODE || path.join(root, 'build', 'node'), 'x.js'));
const { chromium } = require('playwright-core');

const CHROMIUM = process.env.DDPSPY_CHROMIUM || '/usr/lib/chromium/chromium';
// without the background-networking flags Chromium's many connections are refused on a closed network
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'];

async function devtools(page, file, png) {
  await page.goto('devtools://devtools/bundled/trace_app.html', { timeout: 30000 });
  await page.waitForTimeout(1000);
  await page.keyboard.press('Escape'); // the "debugging connection was closed" notice of a hostless DevTools
  await page.getByText('Performance', { exact: true }).first().click({ timeout: 15000 });
  await page.locator('input[type=file]').first().setInputFiles(file);
  let out = null;
  for (let i = 0; i < 120 && !out; i++) {
    await page.waitForTimeout(250);
    out = await page.evaluate(async () => {
      const T = await import('./panels/timeline/timeline.js');
      const panel = T.TimelinePanel.TimelinePanel.instance();
      const pt = panel.getParsedTraceForLayoutTests?.();
      if (!pt) return null;
      const d = pt.data ?? pt;
      const names = d.Meta.processNames;
      const procs = [...d.Renderer.processes.entries()].map(([pid, p]) => ({
        pid,
        name: names.get(pid)?.args?.name ?? null,
        threads: [...p.threads.entries()].map(([tid, t]) => ({ tid, name: t.name ?? null, entries: t.entries.length })),
      }));
      const flows = d.Flows.flows.map(f => f.map(e => [e.pid, e.tid, e.ts]));
      return { loaded: true, raw: panel.getTraceEngineRawTraceEventsForLayoutTests()?.length ?? null, procs, flows };
    }).catch(() => null);
  }
  if (!out)
    out = { loaded: false }; // refused: nothing in the panel's model after 30 s
  if (png) {
    await page.waitForTimeout(500);
    await page.screenshot({ path: png });
  }
  return out;
}

async function flows(page, file, png, rank) {
  const out = await devtools(page, file, null);
  if (!out.loaded)
    return out;
  await page.setViewportSize({ width: 1280, height: 1040 });
  const r = await page.evaluate(async (late) => {
    const T = await import('./panels/timeline/timeline.js');
    const panel = T.TimelinePanel.TimelinePanel.instance();
    const fc = panel.getFlameChart();
    const main = fc.getMainFlameChart();
    const groups = main.timelineData()?.groups || [];
    groups.forEach((g, i) => {
      if (/^(rank \d|critical path|steps|.*\(training thread\))/.test(g.name))
        main.expandGroup(i, true);
      else if (g.nestingLevel > 0 || g.name)
        try { main.hideGroup(i); } catch (e) { /* (not every group can be hidden) */ }
    });
    const d = panel.getParsedTraceForLayoutTests();
    const data = d.data ?? d;
    let pid = null;
    for (const [p, e] of data.Meta.processNames)
      if (e.args.name === 'rank ' + late) pid = p;
    const mine = data.Flows.flows.filter(f => f[0].pid === pid || f[f.length - 1].pid === pid);
    if (!mine.length)
      return { selected: false };
    const f = mine[mine.length - 1];
    const ev = f.find(e => e.pid === pid);
    const t0 = Math.min(...f.map(e => e.ts)) / 1000, t1 = Math.max(...f.map(e => e.ts + (e.dur || 0))) / 1000;
    main.setWindowTimes(t0 - 0.25 * (t1 - t0), t1 + 0.25 * (t1 - t0));
    fc.setSelectionAndReveal(T.TimelineSelection.selectionFromEvent(ev));
    return { selected: true, flows: mine.length };
  }, rank);
  await page.waitForTimeout(500);
  // the console drawer and the flame chart's shortcut help, where they opened: closed
  await page.keyboard.press('Escape');
  await page.waitForTimeout(300);
  await page.locator('[aria-label="Close drawer"]').first().click({ timeout: 1000 }).catch(() => {});
  await page.waitForTimeout(800);
  await page.screenshot({ path: png });
  return Object.assign(out, r);
}

async function html(page, file, png) {
  const requests = [];
  page.on('request', r => requests.push(r.url()));
  const violations = [];
  page.on('console', m => { if (/Content Security Policy|Refused/i.test(m.text())) violations.push(m.text()); });
  let dialogs = 0;
  page.on('dialog', d => { dialogs++; d.dismiss(); });
  const url = 'file://' + path.resolve(file);
  await page.goto(url);
  const out = await page.evaluate(() => {
    const q = (s) => [...document.querySelectorAll(s)];
    return {
      title: document.title,
      scripts: q('script').length,
      handlers: q('*').filter(e => [...e.attributes].some(a => /^on/i.test(a.name))).length,
      csp: document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.content ?? null,
      verdict: document.querySelector('.verdict')?.textContent ?? null,
      critbar: q('#critbar rect.share').map(r => r.dataset.cat),
      bars: q('#ranks .rank-bar').map(g => ({ rank: +g.dataset.rank, late: g.classList.contains('late'),
        text: g.querySelector('text').textContent })),
      timelines: q('figure.timeline').map(f => ({ late: +f.dataset.lateRank, first: +f.dataset.firstStep,
        lanes: [...f.querySelectorAll('g.lane')].map(g => ({ rank: +g.dataset.rank, late: g.classList.contains('late') })),
        waits: f.querySelectorAll('rect.wait').length, arrivals: f.querySelectorAll('path.arrival').length })),
      findings: q('li.finding').map(l => ({ kind: l.dataset.kind, rank: +l.dataset.rank,
        advice: l.querySelectorAll('.advice li').length, evidence: l.querySelectorAll('dl.evidence dt').length })),
      warnings: q('.warn li').map(l => l.textContent),
      body: document.body.innerText,
    };
  });
  out.requests = requests.filter(u => u !== url);
  out.violations = violations;
  out.dialogs = dialogs;
  await page.screenshot({ path: png, fullPage: true });
  return out;
}

const [mode, file, png, arg] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  const out = mode === 'devtools' ? await devtools(page, file, png)
    : mode === 'flows' ? await flows(page, file, png, +arg) : await html(page, file, png);
  console.log(JSON.stringify(out));
} finally {
  await browser.close();
}
