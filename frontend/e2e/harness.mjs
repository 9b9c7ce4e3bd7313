// The end-to-end harness: the real system (a fresh Postgres database, the
// gateway binary with embedded NATS, one runner) and headless Chromium driven
// by playwright-core, one of each per scenario so scenarios cannot disturb
// each other. Every process is started here, tracked by PID and stopped here
// (SIGTERM, then SIGKILL); their output goes to test-artifacts/e2e/logs/.
//
// Needs TEST_DATABASE_URL (scripts/with-test-pg.sh sets it), bin/gateway and
// bin/runner (make build) and /usr/bin/chromium (scripts/ensure-chromium.sh).
//
// This file is the entry the scenarios (and frontend/bench/) import from; the
// harness itself is in harness/, a module per concern:
//   paths.mjs      where the binaries, Chromium, screenshots and logs are
//   wait.mjs       T (deadlines) and waitUntil
//   demo.mjs       the demo engine's answers (streamText, demoMarkdown)
//   processes.mjs  child processes by PID; Proc.match reads a chosen port back
//   sql.mjs        psql, a database per scenario
//   system.mjs     startSystem: database, gateway(s), runners, all on port 0
//   browser.mjs    Chromium and the probes every page records with
//   page.mjs       what a scenario does with the chat UI and reads off it
//   scenario.mjs   one scenario with its own system, browser and screenshots
//   proxies.mjs    the holding, WebSocket-refusing and throttling proxies
export { root, artifacts } from './harness/paths.mjs';
export { T, waitUntil } from './harness/wait.mjs';
export { streamText, demoMarkdown } from './harness/demo.mjs';
export { freePort } from './harness/processes.mjs';
export { psql, sqlRows } from './harness/sql.mjs';
export { startSystem } from './harness/system.mjs';
export { launchBrowser, newContext } from './harness/browser.mjs';
export { sel, openApp, waitLoaded, send, sendShown, enterShown, assistantOf, answerText, renderedText, waitStatus, waitTextAtLeast, progressOf, threeShots } from './harness/page.mjs';
export { scenario } from './harness/scenario.mjs';
export { startHoldProxy, startWsBlockingProxy, startThrottleProxy } from './harness/proxies.mjs';
