#!/usr/bin/env python3
"""Runs a plan with `sluice run --trace --report`, checks the report in headless
Chromium as a person would see it, and writes the screenshots of
docs/observability.md.

    scripts/observability_images.py --sluice build/sluice \
        --make-dataset build/sluice_make_dataset --out docs/images

What it does (stdlib only; Chromium is driven over the DevTools protocol on a
pipe, --remote-debugging-pipe, so no websocket package is needed):
  1. makes a small synthetic JPEG data set (two files damaged), compiles
     tests/runtime/loader/loader_test.yaml, runs it for 2 epochs with
     --trace and --report, and checks the trace parses;
  2. opens report.html from file:// and asserts that every chart (svg.chart)
     has a non-zero size and draws something, that no console error or
     exception was logged and that nothing was fetched from the network;
     screenshots the page (OUT/report.png);
  3. renders a window of the trace as an SVG timeline (this script's own
     drawing of the trace events, one row per track, not Perfetto's UI),
     opens it the same way and screenshots it (OUT/trace.png).
Exit status: 0 ok, 1 a check failed, 77 Chromium is missing (skip) unless
CI=true, where a missing Chromium is a failure.
"""

import argparse
import base64
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = 77


class Chromium:
    """Headless Chromium driven over --remote-debugging-pipe (fd 3: commands
    to the browser, fd 4: replies and events, NUL-terminated JSON)."""

    def __init__(self, binary, profile_dir):
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire():  # in the child: fd 3 reads commands, fd 4 writes replies
            a, b = os.dup(to_child_r), os.dup(from_child_w)  # neither is 3 or 4 now
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [binary, "--headless", "--no-sandbox", "--disable-gpu",
                "--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking",
                "--hide-scrollbars", f"--user-data-dir={profile_dir}", "about:blank"]
        # close_fds=False: fds 3 and 4 made by dup2 in the child are
        # inheritable; the parent's own fds are not (PEP 446).
        self.proc = subprocess.Popen(args, preexec_fn=wire, close_fds=False,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.events = []
        self.session = None

    def _read_message(self):
        while b"\0" not in self._buf:
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method, params=None, session=True):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method):
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            e = self._read_message()
            if e.get("method") == method:
                return e
            self.events.append(e)

    def open(self, url, width, height):
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        self.session = self.send("Target.attachToTarget",
                                 {"targetId": target["targetId"], "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluate failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path):
        height = self.evaluate("Math.ceil(document.documentElement.scrollHeight)")
        width = self.evaluate("Math.ceil(document.documentElement.scrollWidth)")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def problems(self):
        """Console errors, uncaught exceptions and network requests seen so far."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(f"console.{p['type']}: {p.get('args')}")
            elif m == "Runtime.exceptionThrown":
                out.append(f"exception: {p.get('exceptionDetails')}")
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(f"log error: {p['entry'].get('text')}")
            elif m == "Network.requestWillBeSent":
                url = p.get("request", {}).get("url", "")
                if not url.startswith(("file:", "data:", "about:")):
                    out.append(f"network request: {url}")
        return out

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except Exception:  # noqa: BLE001 - the browser may already be gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# What a chart must look like in the rendered page: every svg.chart with its
# on-screen size and how many drawn marks (paths, bars) it holds.
CHARTS_JS = """JSON.stringify(Array.from(document.querySelectorAll('svg.chart')).map(s => {
  const r = s.getBoundingClientRect();
  return {id: s.id, width: r.width, height: r.height,
          marks: s.querySelectorAll('path.series, rect.bar').length,
          nodata: s.textContent.includes('no data')};
}))"""

TRACE_COLORS = {"sample": "#d9d9d9", "read": "#76b7b2", "decode": "#4e79a7", "kernel": "#f28e2b",
                "next": "#bab0ac", "wait": "#e15759", "device copy": "#59a14f",
                "device sync": "#b07aa1"}


def render_trace(trace, out_html, window_ms=None):
    """An SVG timeline of `trace` (Chrome trace-event JSON): one row per track
    (tid), complete events as rectangles (nested ones drawn thinner inside
    their parent), counters as step lines under the rows. Only the window
    [start, start + window_ms) is drawn, starting at the second "next" span."""
    events = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    # Longest first: a parent is drawn before (under) the spans inside it.
    spans = sorted((e for e in events if e["ph"] == "X"), key=lambda e: -e["dur"])
    nexts = sorted(e["ts"] for e in spans if e["name"] == "next")
    t0 = nexts[1] if len(nexts) > 1 else min(e["ts"] for e in spans)
    t_end = max(e["ts"] + e["dur"] for e in spans)
    t1 = t_end if window_ms is None else min(t_end, t0 + window_ms * 1e3)
    tids = sorted(t for t in names if t != 1)  # the scheduler row holds only counters
    counters = {}
    for e in events:
        if e["ph"] == "C":
            counters.setdefault(e["name"], []).append((e["ts"], e["args"]["value"]))
    left, width, row_h, counter_h = 170, 1100, 34, 46
    height = 40 + row_h * len(tids) + counter_h * len(counters) + 40
    x = lambda t: left + (t - t0) / (t1 - t0) * (width - left - 10)  # noqa: E731
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'class="chart" id="trace-timeline"><rect width="{width}" height="{height}" fill="#fff"/>']
    svg.append(f'<text x="{left}" y="18" font-size="13" font-weight="600">'
               f'{(t1 - t0) / 1e3:.1f} ms of the trace (from the second Next() call)</text>')
    for row, tid in enumerate(tids):
        y = 30 + row * row_h
        svg.append(f'<text x="{left - 8}" y="{y + row_h / 2 + 4}" font-size="12" '
                   f'text-anchor="end">{html.escape(names[tid])}</text>')
        svg.append(f'<line x1="{left}" x2="{width - 10}" y1="{y + row_h}" y2="{y + row_h}" '
                   f'stroke="#eee"/>')
        for e in spans:
            if e["tid"] != tid or e["ts"] + e["dur"] < t0 or e["ts"] > t1:
                continue
            outer = e["name"] in ("sample", "next")
            a, b = max(x(e["ts"]), left), min(x(e["ts"] + e["dur"]), width - 10)
            top, h = (y + 3, row_h - 6) if outer else (y + 9, row_h - 18)
            title = html.escape(f'{e["name"]} {e["dur"] / 1e3:.3f} ms {e.get("args", {})}')
            svg.append(f'<rect x="{a:.1f}" y="{top}" width="{max(b - a, 0.6):.1f}" height="{h}" '
                       f'fill="{TRACE_COLORS.get(e["name"], "#999")}"><title>{title}</title></rect>')
    for k, (name, values) in enumerate(sorted(counters.items())):
        y = 30 + len(tids) * row_h + k * counter_h
        top = max(v for _, v in values) or 1
        svg.append(f'<text x="{left - 8}" y="{y + counter_h / 2 + 4}" font-size="11" '
                   f'text-anchor="end">{html.escape(name)}</text>')
        pts, last = [], None
        for ts, v in values:
            if ts > t1:
                break
            yy = y + counter_h - 6 - v / top * (counter_h - 12)
            if ts >= t0:
                if last is not None:
                    pts.append(f"{x(ts):.1f},{last:.1f}")
                pts.append(f"{x(ts):.1f},{yy:.1f}")
            last = yy
        if pts:
            svg.append(f'<polyline class="series" points="{" ".join(pts)}" fill="none" '
                       f'stroke="#4e79a7" stroke-width="1.5"/>')
    legend_y = height - 14
    lx = left
    for name, color in TRACE_COLORS.items():
        svg.append(f'<rect x="{lx}" y="{legend_y - 10}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{lx + 14}" y="{legend_y}" font-size="11">{name}</text>')
        lx += 24 + 7 * len(name)
    svg.append("</svg>")
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>trace timeline</title>"
            "<style>body{margin:0;font-family:sans-serif}</style></head><body>"
            + "".join(svg) + "</body></html>")
    with open(out_html, "w") as f:
        f.write(page)


def run_plan(args, work):
    data = os.path.join(work, "data")
    plan = os.path.join(work, "demo.plan")
    subprocess.run([args.make_dataset, data, "--images", str(args.images), "--classes", "4",
                    "--seed", "5"], check=True, stdout=subprocess.DEVNULL)
    # Two damaged files, so the report's bad-sample table has rows (the plan's
    # policy is skip).
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs)
    with open(files[3], "r+b") as f:
        f.truncate(300)
    with open(files[11], "wb") as f:
        f.write(b"not a jpeg")
    subprocess.run([args.sluice, "compile", args.spec, "-o", plan], check=True,
                   stdout=subprocess.DEVNULL)
    trace, report = os.path.join(work, "run.json"), os.path.join(work, "report.html")
    out = subprocess.run([args.sluice, "run", plan, "--var", f"DATA={data}", "--epochs",
                          str(args.epochs), "--trace", trace, "--report", report],
                         check=True, capture_output=True, text=True).stdout
    print(out, end="")
    with open(trace) as f:
        return json.load(f), report


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sluice", required=True)
    p.add_argument("--make-dataset", required=True)
    p.add_argument("--spec", default=os.path.join(ROOT, "tests/runtime/loader/loader_test.yaml"))
    p.add_argument("--out", required=True, help="where report.png and trace.png go")
    p.add_argument("--images", type=int, default=400)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--window-ms", type=float, default=60,
                   help="how much of the trace the timeline picture shows")
    p.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    args = p.parse_args()
    if not args.chromium:
        if os.environ.get("CI") == "true":
            print("FAIL: chromium is not installed (scripts/install_deps.sh installs it)")
            return 1
        print("SKIP: chromium is not installed")
        return SKIP
    os.makedirs(args.out, exist_ok=True)
    failures = []
    with tempfile.TemporaryDirectory(prefix="sluice_obs_") as work:
        trace, report = run_plan(args, work)
        spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        if not {"read", "decode", "kernel", "sample", "next"} <= {e["name"] for e in spans}:
            failures.append("the trace lacks read/decode/kernel/sample/next spans")
        browser = Chromium(args.chromium, os.path.join(work, "profile"))
        try:
            browser.open("file://" + report, 900, 1000)
            charts = json.loads(browser.evaluate(CHARTS_JS))
            want = {"chart-throughput", "chart-latency", "chart-stages", "chart-stages-time",
                    "chart-wait", "chart-tuner"}
            got = {c["id"] for c in charts}
            if not want <= got:
                failures.append(f"charts missing from the page: {sorted(want - got)}")
            for c in charts:
                print(f"chart {c['id']}: {c['width']:.0f}x{c['height']:.0f} px, {c['marks']} marks")
                if c["width"] <= 0 or c["height"] <= 0:
                    failures.append(f"chart {c['id']} has no size on the page")
                if c["marks"] == 0 or c["nodata"]:
                    failures.append(f"chart {c['id']} draws no data")
            browser.screenshot(os.path.join(args.out, "report.png"))
            failures += browser.problems()
            rows = browser.evaluate("document.querySelectorAll('table.list tr').length")
            if rows < 3:  # the header and the two damaged files (each epoch)
                failures.append(f"the bad-sample table has {rows} rows")
            trace_html = os.path.join(work, "trace.html")
            render_trace(trace, trace_html, window_ms=args.window_ms)
            browser.events.clear()
            browser.open("file://" + trace_html, 1100, 100)
            browser.screenshot(os.path.join(args.out, "trace.png"))
            failures += browser.problems()
        finally:
            browser.close()
    for f in failures:
        print("FAIL:", f)
    for name in ("report.png", "trace.png"):
        path = os.path.join(args.out, name)
        size = os.path.getsize(path) if os.path.exists(path) else 0
        print(f"wrote {path} ({size} bytes)")
        if size < 1000:
            failures.append(f"{name} is empty")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
