"""Tests of bench/report_svg.py and bench/report (ctest bench_report_selftest).

Run: python3 -m unittest -v test_report   (from bench/)
"""

import importlib.machinery
import importlib.util
import io
import json
import os
import re
import tempfile
import unittest
import xml.etree.ElementTree as ET
from contextlib import redirect_stderr

import report_svg

HERE = os.path.dirname(os.path.abspath(__file__))
NS = "{http://www.w3.org/2000/svg}"


def load_report():
    """bench/report has no .py suffix (it is a command): load it by path."""
    loader = importlib.machinery.SourceFileLoader("bench_report", os.path.join(HERE, "report"))
    spec = importlib.util.spec_from_loader("bench_report", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


report = load_report()


def parse(svg):
    root = ET.fromstring(svg)
    assert root.tag == NS + "svg", root.tag
    return root


def elements(root, tag, cls=None):
    found = root.iter(NS + tag)
    return [e for e in found if cls is None or cls in (e.get("class") or "").split()]


def tick_positions(root, axis):
    """label text -> pixel position of the tick labels of one axis ('x' or 'y')."""
    out = {}
    for t in elements(root, "text", "%stick-label" % axis):
        pos = float(t.get(axis))
        out[t.text] = pos - 4 if axis == "y" else pos  # y labels sit 4 px below their tick
    return out


class ScaleTest(unittest.TestCase):
    def test_linear_maps_the_domain_ends_onto_the_pixel_ends(self):
        s = report_svg.LinearScale((0, 200), (400, 40))
        self.assertEqual(s(0), 400)
        self.assertEqual(s(200), 40)
        self.assertEqual(s(100), 220)

    def test_log_places_decades_evenly(self):
        s = report_svg.LogScale((1, 1000), (300, 0))
        self.assertAlmostEqual(s(10), 200)
        self.assertAlmostEqual(s(100), 100)
        self.assertEqual(s.ticks()[0], 1)
        self.assertIn(1000, s.ticks())

    def test_log_refuses_a_domain_that_is_not_positive(self):
        with self.assertRaises(ValueError):
            report_svg.LogScale((0, 10), (0, 1))

    def test_nice_ticks_are_round_and_cover_the_data(self):
        self.assertEqual(report_svg.nice_ticks(0, 97), [0, 20, 40, 60, 80, 100])
        self.assertEqual(report_svg.nice_domain(3, 13012), (0, 15000))  # a step of 5 000

    def test_tick_labels_are_short(self):
        self.assertEqual(report_svg.format_tick(15000), "15k")
        self.assertEqual(report_svg.format_tick(2.5), "2.5")
        self.assertEqual(report_svg.format_tick(2e6), "2M")


class LineChartTest(unittest.TestCase):
    def chart(self, **kw):
        series = [("p50", [(0, 0), (50, 50), (100, 100)]), ("p99 <&>", [(0, 20), (100, 80)])]
        return parse(report_svg.line_chart(series, "T & t", "x", "y", **kw))

    def test_it_is_well_formed_with_a_legend_entry_per_series(self):
        root = self.chart()
        legend = [e for e in root.iter(NS + "g") if e.get("class") == "legend"][0]
        labels = [t.text for t in legend.iter(NS + "text")]
        self.assertEqual(labels, ["p50", "p99 <&>"])
        self.assertEqual(len(elements(root, "polyline", "series")), 2)

    def test_points_land_where_the_axes_say(self):
        root = self.chart()
        ys, xs = tick_positions(root, "y"), tick_positions(root, "x")
        points = {(float(c.get("data-x")), float(c.get("data-y"))): (float(c.get("cx")), float(c.get("cy")))
                  for c in elements(root, "circle", "s0")}
        self.assertAlmostEqual(points[(100, 100)][1], ys["100"], delta=0.1)
        self.assertAlmostEqual(points[(0, 0)][1], ys["0"], delta=0.1)
        self.assertAlmostEqual(points[(100, 100)][0], xs["100"], delta=0.1)
        self.assertAlmostEqual(points[(50, 50)][1], (ys["40"] + ys["60"]) / 2, delta=0.1)
        self.assertAlmostEqual(points[(50, 50)][0], (xs["40"] + xs["60"]) / 2, delta=0.1)
        axis = elements(root, "line", "xaxis")[0]
        self.assertAlmostEqual(points[(0, 0)][0], float(axis.get("x1")), delta=0.1)

    def test_log_y_places_decades_evenly_and_drops_what_it_cannot_place(self):
        series = [("p99", [(1, 1), (2, 10), (3, 100), (4, 0)])]
        root = parse(report_svg.line_chart(series, "t", "x", "y", log_y=True))
        cys = [float(c.get("cy")) for c in elements(root, "circle", "s0")]
        self.assertEqual(len(cys), 3)
        self.assertAlmostEqual(cys[0] - cys[1], cys[1] - cys[2], delta=0.2)
        self.assertAlmostEqual(cys[1], tick_positions(root, "y")["10"], delta=0.1)

    def test_bands_span_their_x_range(self):
        series = [("rss", [(0, 5), (10, 6), (20, 7), (30, 6)])]
        root = parse(report_svg.line_chart(series, "t", "s", "MiB", bands=[(10, 20, "burst")]))
        band = elements(root, "rect", "band")[0]
        cx = {float(c.get("data-x")): float(c.get("cx")) for c in elements(root, "circle", "s0")}
        self.assertAlmostEqual(float(band.get("x")), cx[10], delta=0.1)
        self.assertAlmostEqual(float(band.get("x")) + float(band.get("width")), cx[20], delta=0.2)

    def test_no_points_is_an_error(self):
        with self.assertRaises(ValueError):
            report_svg.line_chart([("a", [])], "t", "x", "y")


class BarChartTest(unittest.TestCase):
    def test_bars_are_as_tall_as_their_values_and_the_reference_crosses_its_group(self):
        groups = [("scale", [("stateless", 40.0), ("legacy", 20.0)], 20.0), ("tls <x>", [("https", 10.0)], None)]
        root = parse(report_svg.bar_chart(groups, "CPU", "µs"))
        bars = elements(root, "rect", "bar")
        self.assertEqual(len(bars), 3)
        bottom = float(elements(root, "line", "xaxis")[0].get("y1"))
        heights = [float(b.get("height")) for b in bars]
        self.assertAlmostEqual(heights[0] / heights[1], 2.0, delta=0.01)
        self.assertAlmostEqual(heights[1] / heights[2], 2.0, delta=0.01)
        self.assertAlmostEqual(float(bars[0].get("y")) + heights[0], bottom, delta=0.1)
        ref = elements(root, "line", "ref")
        self.assertEqual(len(ref), 1)  # only the group that has a baseline
        self.assertAlmostEqual(float(ref[0].get("y1")), float(bars[1].get("y")), delta=0.1)
        self.assertLessEqual(float(ref[0].get("x1")), float(bars[0].get("x")))
        self.assertGreaterEqual(float(ref[0].get("x2")), float(bars[1].get("x")) + float(bars[1].get("width")))
        self.assertLess(float(ref[0].get("x2")), float(bars[2].get("x")))


def line(**kw):
    return json.dumps(kw)


def run_line(target, cpu, **kw):
    base = dict(bench="mcpg-load", wire="stateless", connections=64, duration_s=2.0, calls_per_s=10000.0,
                p50_us=4000.0, p99_us=9000.0, p999_us=12000.0, target=target, round=1, cpu_us_per_call=cpu,
                vm_rss_kb=7000, threads=7, core_other_pct=1.0, core_steal_pct=0.0)
    base.update(kw)
    return line(**base)


# A results file as bench/run.sh scale cpu openloop governed memtime would leave it (shortened).
RESULTS = [
    run_line("stateless", 40.0), run_line("nginx", 20.0),
    line(bench="wires-summary", target="stateless", rounds=1, clean_runs=1, calls_per_s=10000.0, p50_us=4000.0,
         p99_us=9000.0, cpu_us_per_call=40.0, vm_rss_kb=7168, threads=7),
    line(bench="wires-summary", target="nginx", rounds=1, clean_runs=1, calls_per_s=30000.0, p50_us=1000.0,
         p99_us=2000.0, cpu_us_per_call=20.0, vm_rss_kb=5000, threads=1),
    run_line("nginx", 16.0, calls_per_s=31000.0), run_line("mcpg", 48.0, core_other_pct=30.0),
    run_line("closed-loop", 39.0, config="bench.json", calls_per_s=13000.0),
    run_line("open-loop", 60.0, config="bench.json", fraction=0.5, rate=6500.0, calls_per_s=6499.0,
             max_backlog=3, backlog_at_end=0, p99_us=1500.0),
    run_line("open-loop", 55.0, config="bench.json", fraction=1.0, rate=13000.0, calls_per_s=12000.0,
             max_backlog=900, backlog_at_end=40, p99_us=90000.0),
    line(bench="governed", scope="global", tool="echo", connections=64, duration_s=10.0, admitted=50000, refused=0,
         judged_per_s=5000, admitted_per_s=5000.0, max_in_flight="-", cpu_us_per_admitted=25.0,
         cpu_us_per_judged=25.0, refusals_logged=0, refusals_from_memory=0, coordinator_ops=0),
    line(bench="governed", scope="global", tool="rated", connections=64, duration_s=30.0, admitted=309,
         refused=99691, judged_per_s=3333, admitted_per_s=10.3, max_in_flight="-", cpu_us_per_admitted=9000.0,
         cpu_us_per_judged=30.0, refusals_logged=99691, refusals_from_memory=99000, coordinator_ops=1000),
    line(bench="memtime", config="bench.json", burst="stateless", connections=512, burst_s=3, idle_s=3,
         calls_per_s=19000.0, rss_before_kb=6553, rss_peak_kb=10649, rss_after_kb=10649, rss_idle_base_kb=6553,
         threads_after=7, t_start_s=3.0, t_end_s=6.0, t_idle_end_s=9.0),
    line(bench="memtime-sample", config="bench.json", t_s=0.0, rss_kb=6553, threads=7, fds=10),
    line(bench="memtime-sample", config="bench.json", t_s=4.0, rss_kb=10649, threads=7, fds=500),
    line(bench="memtime-sample", config="bench.json", t_s=8.0, rss_kb=10649, threads=7, fds=10),
    line(bench="fleet-scale", store="nats", replicas=1, gateways=4, settings="default", wire="legacy", spread="call",
         connections=64, duration_s=10.0, ok=60000, errors=0, calls_per_s=6000.0, p50_us=9000.0, p99_us=30000.0,
         gw_cpu_us_per_call=80.0, gw_cores_each=0.12, store_cores=0.05, store_ops_per_call=0.06,
         store_ops="nats_msgs", gw_rss_kb_mean=9216, gw_rss_kb_max=10240, steal_pct=2.5, others_pct=1.0),
    line(bench="fleet-scale", store="memory", replicas=None, gateways=1, settings="tuned", wire="stateless",
         spread="connection", connections=64, duration_s=10.0, ok=90000, errors=0, calls_per_s=9000.0,
         p50_us=6000.0, p99_us=20000.0, gw_cpu_us_per_call=45.0, gw_cores_each=0.4, store_cores=0.0,
         store_ops_per_call=None, store_ops="none", gw_rss_kb_mean=7168, gw_rss_kb_max=7168, steal_pct=0.5,
         others_pct=0.0),
    line(bench="fleet-churn", store="redis", replicas=1, gateways=4, clients=16, duration_s=10.0,
         sessions_ended=30000, sessions_per_s=3000.0, end_p50_us=400.0, end_p99_us=1200.0, ended_before_answer=10,
         stuck=0, stuck_after_s=5, errors=0, gw_cpu_us_per_session=240.0, store_cores=0.5,
         store_ops_per_session=38.0, store_ops="redis_cmds", loadgen_cpu_pct=30.0, steal_pct=1.0, others_pct=2.0),
    line(bench="events", scenario="events", fleet="redis4", fleet_label="four gateways, Redis", store="redis",
         gateways=4, rate=400, load_rc=0, accepted=12000, accepted_per_s=400.0, refused=0, refused_by={},
         deliveries_expected=768000, deliveries_within_3s=767000, lost=2, duplicated=0, reordered=1, p50_ms=9.4,
         p99_ms=40.2, gw_cpu_us_per_delivery=51.2, store_cores=0.2, coord_msgs_per_event=9.5),
]


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.results = os.path.join(self.dir.name, "results.jsonl")
        with open(self.results, "w") as f:
            f.write("\n".join(RESULTS) + "\nnot json\n")
        self.out = os.path.join(self.dir.name, "docs", "report.md")
        self.svg = os.path.join(self.dir.name, "docs", "bench")

    def tearDown(self):
        self.dir.cleanup()

    def generate(self, *extra):
        with redirect_stderr(io.StringIO()) as err:
            rc = report.main([self.results, "--out", self.out, "--svg-dir", self.svg] + list(extra))
        self.assertEqual(rc, 0, err.getvalue())
        self.assertIn("not JSON, skipped", err.getvalue())
        with open(self.out, encoding="utf-8") as f:
            return f.read()

    def section(self, page, title_start):
        m = re.search(r"^## %s.*?(?=^## )" % re.escape(title_start), page, re.S | re.M)
        self.assertIsNotNone(m, title_start)
        return m.group(0)

    def test_nginx_lines_go_to_the_scenario_that_measured_them(self):
        with redirect_stderr(io.StringIO()):
            grouped = report.classify(report.load([self.results]))
        scale_nginx = [r for r in grouped["scale"] if r.get("target") == "nginx"]
        cpu_nginx = [r for r in grouped["cpu"] if r.get("target") == "nginx"]
        self.assertEqual([r["cpu_us_per_call"] for r in scale_nginx if r["bench"] == "mcpg-load"], [20.0])
        self.assertEqual([r["cpu_us_per_call"] for r in cpu_nginx], [16.0])

    def test_each_scenario_stands_beside_the_reference_with_its_command(self):
        page = self.generate()
        glance = self.section(page, "At a glance")
        self.assertIn("| 10\u202f000 stateless, — legacy | 4 801 stateless, 3 811 legacy |", glance)
        self.assertIn("| 40.0–40.0 µs (nginx in the same run: 20.0 µs) | 251–432 µs |", glance)
        self.assertIn("| 1 of 1 limited runs held their limit |", glance)
        scale = self.section(page, "Tool calls on one gateway")
        self.assertRegex(scale, r"\| `stateless` \| 10\u202f000 \| 4\.00 / 9\.00 \| 40\.00 \| 2\.00× .*\| 4\u202f801 \| "
                                r"13\.0 / 20\.9 \| 338 \| 586 \|")
        self.assertIn("bench/wires.sh --rounds 1 --duration 2", scale)
        cpu = self.section(page, "CPU per call beside nginx")
        self.assertRegex(cpu, r"\| `mcpg` \| .* \| 48\.00 \| 3\.00× \|")
        self.assertIn("1 of 2 measured runs were not clean", cpu)
        governed = self.section(page, "Limits")
        self.assertIn("310 over [t0, t0 + 30.000 s], 309 half-open", governed)
        self.assertIn("310 (at most 10 + 10/s × 30 s = 310)", governed)
        self.assertIn("| 30.00 | 1.20× |", governed)  # CPU per judged call beside the unlimited echo's 25 µs
        memtime = self.section(page, "Memory over time")
        self.assertIn("61 → 567 → 140", memtime)

    def test_the_fleet_rows_stand_beside_the_reference_rows_of_the_same_shape(self):
        page = self.generate()
        fleet = self.section(page, "A fleet: tool calls")
        # the reference's four-gateway NATS legacy row is each call on the next replica: 2 745 calls/s, 952 µs, 6.2
        self.assertRegex(fleet, r"\| NATS R1 \| 4 \| default \| legacy, each call on the next replica \| 6\u202f000 \| "
                                r"9\.0 / 30\.0 \| 80\.0 \| 0\.12 \| 0\.05 \| 0\.06 \| 9\.0 \| 2\.5 / 1 \| 2\u202f745 \| "
                                r"22\.3 / 52\.3 \| 952 \| 6\.20 \|")
        self.assertRegex(fleet, r"\| one gateway alone \(coordinator_memory\) \| 1 \| tuned \| stateless \| 9\u202f000 \| .* "
                                r"\| 7\u202f718 \| 7\.9 / 12\.1 \| 251 \| — \|")
        self.assertIn("bench/fleet.sh --scenario scale --stores \"nats memory\" --gateways \"4\" --rounds 1 --duration 10", fleet)
        churn = self.section(page, "A fleet: sessions")
        self.assertIn("| Redis | 4 | 3\u202f000 | 0.40 / 1.20 | 0 | 0 | 240 | 38.0 | 30 % | 1.0 / 2 | 1 366 | 2.2 / 6.2 | 0 |",
                      churn)
        self.assertIn("No stream was stuck.", churn)
        events = self.section(page, "MCP Events")
        self.assertIn("| four gateways, Redis | 400 | 400 | 767\u202f000 of 768\u202f000 (99.8 %) | 9 / 40 | 51 | 0.20 | 9.5 "
                      "| 2 / 0 / 1 | 400 | 768 256 of 768 256 | 12 / 83 | 92 | — |", events)
        self.assertIn("bench/run.sh events", events)

    def test_the_proxy_section_shows_the_stdio_pair_and_keeps_mcp_proxy_out_of_the_sizing(self):
        def summary(target, cpu, cps, **kw):
            base = dict(bench="proxy-summary", target=target, rounds=2, clean_runs=2, calls_per_s=cps, p50_us=4000.0,
                        p99_us=9000.0, cpu_us_per_call=cpu, vm_rss_kb=8192, threads=8, client_wire="stateless")
            base.update(kw)
            return line(**base)
        with open(self.results, "a") as f:
            f.write("\n".join([
                run_line("direct", 30.0), run_line("proxy", 50.0), run_line("nginx", 25.0),
                run_line("mcpg-stdio", 40.0, wire="legacy"), run_line("mcp-proxy", 1600.0, wire="legacy"),
                summary("direct", 30.0, 17000.0), summary("proxy", 50.0, 12000.0), summary("nginx", 25.0, 37000.0),
                summary("mcpg-stdio", 40.0, 16000.0, client_wire="legacy", ratio_to_mcpg_stdio=1.0,
                        stdio_child_cpu_us_per_call=18.0),
                summary("mcp-proxy", 1600.0, 600.0, client_wire="legacy", ratio_to_mcpg_stdio=40.0,
                        stdio_child_cpu_us_per_call=110.0, vm_rss_kb=163840, threads=11, version="6.7.19"),
            ]) + "\n")
        page = self.generate()
        proxy = self.section(page, "Proxying an MCP server")
        self.assertIn("| `mcp-proxy` | 600 | 4.00 / 9.00 | 1\u202f600.00 | 64.00× | 2 of 2 |", proxy)
        self.assertIn("| `mcpg-stdio` | legacy | 16\u202f000 | 40.00 | 1.00× | 1.00× | 18.00 | 8.0 | 8 |", proxy)
        self.assertIn("| `mcp-proxy` 6.7.19 | legacy | 600 | 1\u202f600.00 | 40.00× | 0.04× | 110.00 | 160.0 | 11 |",
                      proxy)
        self.assertIn("p50 7.0 ms, p99 13.7 ms at a fixed 3 000 calls/s", proxy)
        self.assertIn("bench/proxy.sh --rounds 1 --duration 2", proxy)
        sizing = self.section(page, "Sizing")
        self.assertIn("| proxy | `mcpg-stdio` | 40.00 |", sizing)
        self.assertNotIn("mcp-proxy", sizing)

    def test_missing_scenarios_are_listed_with_their_command_and_not_invented(self):
        page = self.generate()
        missing = page.split("## Not in these results", 1)[1]
        for s in ("micro", "proxy", "reload", "security", "tls", "backend_latency", "soak"):
            self.assertIn("`RESULTS=results.jsonl bench/run.sh %s`" % s, missing)
        for s in ("scale", "cpu", "openloop", "governed", "memtime"):
            self.assertNotIn("bench/run.sh %s`" % s, missing)
        self.assertNotIn("## Proxying", page)

    def test_micro_parts_get_their_own_table_beside_the_calls(self):
        micro = [line(bench="micro", variant="inline", calls=12000, failed=0, allocs_per_call=0.0, ns_per_call=400,
                      instructions_per_call=2223),
                 line(bench="micro", variant="st-call", calls=12000, failed=0, allocs_per_call=0.0, ns_per_call=610,
                      instructions_per_call=1800),
                 line(bench="micro", variant="redact-hash", calls=12000, failed=0, allocs_per_call=3.0,
                      ns_per_call=3000, instructions_per_call=5000)]
        with open(self.results, "a") as f:
            f.write("\n".join(micro) + "\n")
        sec = self.section(self.generate(), "Inside one process")
        self.assertRegex(sec, r"\| `inline` \| 2\u202f223 \| 0\.000 \| 0\.40 \| across the cdylib boundary \|")
        parts = sec.split("The parts alone", 1)[1]
        self.assertIn("| `st-call` | stateless wire: tools/call parsed (name against Mcp-Name, arguments) | "
                      "1\u202f800 | 0.000 | 610 |", parts)
        self.assertRegex(parts, r"\| `redact-hash` \| .*SHA-256\) \| 5\u202f000 \| 3\.000 \| 3\u202f000 \|")
        self.assertNotIn("`inline`", parts)
        self.assertIn('bench/micro.sh --variants "inline st-call redact-hash"', sec)

    def test_sizing_multiplies_the_measured_figures(self):
        page = self.generate()
        sizing = self.section(page, "Sizing")
        # 20 000 calls/s × 40 µs = 0.8 cores; the reference's 441 µs gives 8.8.
        self.assertRegex(sizing, r"\| scale \| `stateless` \| 40\.00 \| 25\u202f000 \| 0\.80 \| 1\.14 \|")
        self.assertIn("| 441 | 2\u202f268 | 8.8 |", sizing)
        self.assertIn("**Worked example: 20\u202f000 stateless calls/s** × 40.00 µs (scale, `stateless`) ≈ "
                      "**0.80 cores** of gateway CPU, 1.14 at 70 % busy; the reference: 20\u202f000 × 441 µs ≈ 8.8 cores",
                      sizing)
        self.assertIn("per idle connection: not given", sizing)
        self.assertIn("1\u202f000 coordinator ops over 100\u202f000 judged calls = 0.0100 per call", sizing)
        self.assertIn("The stateless wire without global limits: **0**", sizing)

    def test_memory_costs_come_from_the_options_or_a_results_line(self):
        page = self.generate("--memory-per-connection-kib", "1.5", "--memory-per-session-kib", "0.5",
                             "--memory-source", "a test")
        # 6553 KiB + 10 000 × 1.5 + 10 000 × 0.5 = 26 553 KiB = 25.9 MiB
        self.assertIn("| 10\u202f000 | 10\u202f000 | 25.9 |", page)
        self.assertIn("1.5 KiB (a test)", page)
        with open(self.results, "a") as f:
            f.write(line(bench="memory-cost", per_connection_kib=2.0, per_session_kib=1.0, source="a results line") + "\n")
        page = self.generate()
        self.assertIn("2.0 KiB (a results line)", page)

    def test_the_charts_are_written_and_parse(self):
        page = self.generate()
        names = sorted(os.listdir(self.svg))
        self.assertEqual(names, ["cpu-per-call.svg", "memtime.svg", "openloop-bench.svg"])
        for n in names:
            with open(os.path.join(self.svg, n), encoding="utf-8") as f:
                parse(f.read())
            self.assertIn("](bench/%s)" % n, page)
        with open(os.path.join(self.svg, "memtime.svg"), encoding="utf-8") as f:
            root = parse(f.read())
        self.assertEqual(len(elements(root, "rect", "band")), 1)
        self.assertEqual(len(elements(root, "circle", "s0")), 3)


if __name__ == "__main__":
    unittest.main()
