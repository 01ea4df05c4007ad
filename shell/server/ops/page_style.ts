// Shared stylesheet and page frame of /dashboard and /setup.
export const PAGE_CSS = `
:root { --bg: #0f1419; --panel: #182029; --line: #2a3642; --text: #dde3ea;
  --muted: #8b98a5; --accent: #4fa3ff; --ok: #3fb950; --warn: #d29922; --bad: #f85149; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  background: var(--bg); color: var(--text); }
header { display: flex; align-items: baseline; gap: 16px; padding: 14px 24px;
  border-bottom: 1px solid var(--line); }
header h1 { font-size: 18px; margin: 0; }
header nav a { color: var(--muted); margin-right: 12px; text-decoration: none; }
header nav a:hover { color: var(--text); }
main { padding: 20px 24px; max-width: 1200px; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
  padding: 14px 16px; margin-bottom: 16px; }
.panel h2 { font-size: 14px; margin: 0 0 10px; color: var(--muted); font-weight: 600;
  text-transform: uppercase; letter-spacing: .04em; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr));
  gap: 12px; margin-bottom: 16px; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
  padding: 10px 14px; }
.card .label { color: var(--muted); font-size: 12px; }
.card .value { font-size: 22px; font-variant-numeric: tabular-nums; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { color: var(--muted); font-weight: 600; font-size: 12px; }
td.num { font-variant-numeric: tabular-nums; }
input, select, button { font: inherit; color: var(--text); background: #0b1016;
  border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px; }
button { background: var(--accent); border-color: var(--accent); color: #061019;
  cursor: pointer; font-weight: 600; }
button.secondary { background: transparent; color: var(--text); }
.error { color: var(--bad); }
.muted { color: var(--muted); }
.bar { height: 6px; background: #0b1016; border-radius: 3px; overflow: hidden;
  min-width: 80px; }
.bar > div { height: 100%; background: var(--accent); }
.tag { display: inline-block; padding: 0 6px; border-radius: 4px; background: #0b1016;
  border: 1px solid var(--line); margin: 0 4px 2px 0; font-size: 12px; }
.tag.warn { color: var(--warn); border-color: var(--warn); }
.tag.res-loaded { color: var(--ok); border-color: var(--ok); }
.tag.res-loading { color: var(--warn); border-color: var(--warn); }
.tag.res-available { color: var(--muted); }
pre { background: #0b1016; border: 1px solid var(--line); border-radius: 6px;
  padding: 12px; overflow-x: auto; white-space: pre; }
canvas { width: 100%; height: 180px; display: block; }
.hidden { display: none !important; }
.step { display: flex; gap: 12px; }
.step .n { flex: none; width: 26px; height: 26px; border-radius: 13px;
  background: var(--line); text-align: center; line-height: 26px; font-weight: 700; }
.step .body { flex: 1; min-width: 0; }
.field { display: flex; flex-direction: column; gap: 4px; margin: 6px 0; max-width: 520px; }
.field label { color: var(--muted); font-size: 12px; }
#status { padding: 12px 16px; border-radius: 8px; border: 1px solid var(--line);
  font-weight: 600; }
#status.waiting { color: var(--warn); border-color: var(--warn); }
#status.ok { color: #061019; background: var(--ok); border-color: var(--ok); }
.legend span { margin-right: 14px; font-size: 12px; }
.legend i.c-req { background: #4fa3ff; }
.legend i.c-chunks { background: #3fb950; }
.legend i.c-tok { background: #d29922; }
.filters { display: flex; gap: 8px; flex-wrap: wrap; margin-bottom: 10px; }
h3 { font-size: 13px; margin: 10px 0 6px; }
.cards.three { grid-template-columns: 1fr 1fr 1fr; }
.legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px;
  margin-right: 4px; vertical-align: -1px; }
`;

/**
 * The frame /dashboard and /setup share: the head (title, the stylesheet
 * above), the header (the heading, then `header`'s lines: the nav and what
 * else the page shows there), `main`'s sections, and the page's one script.
 */
export function pageHtml(
  p: { title: string; header: string; main: string; script: string },
): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${p.title}</title>
<link rel="stylesheet" href="/ui.css">
<link rel="icon" href="data:,">
</head>
<body>
<header>
  <h1>ModelRelay</h1>
${p.header}
</header>
<main>
${p.main}</main>
<script src="${p.script}"></script>
</body>
</html>
`;
}
