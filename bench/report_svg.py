"""Hand-written SVG charts for bench/report: one function per chart type.

Standard library only (CI runs a clean Debian 12 with no pip). Every chart is
a complete, standalone SVG document with a white background, axes, ticks,
labels and a legend, so it reads the same in a browser and on GitHub (which
shows SVG images but runs no script and loads no font: text uses a generic
family). Coordinates are rounded to 0.1 px to keep the files small and
diffable.
"""

import math
from xml.sax.saxutils import escape

# A palette that stays apart for colour-blind readers (Okabe-Ito).
COLOURS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000")
FONT = "font-family=\"sans-serif\""
# Room around the plot: the y labels on the left, the legend on the right.
MARGIN = {"left": 78, "right": 170, "top": 40, "bottom": 56}
LABEL_ROOM = 60  # below a bar chart's axis: labels turned 35 degrees, about 100 px long


def _num(v):
    """A coordinate as short text: 0.1 px is finer than any screen."""
    text = "%.1f" % v
    return text[:-2] if text.endswith(".0") else text


def _attr(text):
    return escape(str(text), {'"': "&quot;"})


def format_tick(v):
    """A tick label without needless digits: 0.5, 2, 1.5k, 20k, 1M."""
    a = abs(v)
    if a >= 1e6:
        return ("%g" % (v / 1e6)) + "M"
    if a >= 1e4:
        return ("%g" % (v / 1e3)) + "k"
    return "%g" % v


class LinearScale:
    """Maps a domain [d0, d1] onto pixels [r0, r1] linearly."""

    def __init__(self, domain, pixels):
        self.d0, self.d1 = domain
        self.r0, self.r1 = pixels
        if self.d1 == self.d0:
            self.d1 = self.d0 + 1

    def __call__(self, v):
        return self.r0 + (v - self.d0) * (self.r1 - self.r0) / (self.d1 - self.d0)

    def ticks(self):
        return [t for t in nice_ticks(self.d0, self.d1) if self.d0 - 1e-9 <= t <= self.d1 + 1e-9]


class LogScale:
    """Maps a positive domain onto pixels by log10: a decade is a fixed distance."""

    def __init__(self, domain, pixels):
        lo, hi = domain
        if lo <= 0 or hi <= 0:
            raise ValueError("a log scale needs a positive domain, got %r" % (domain,))
        self.l0, self.l1 = math.log10(lo), math.log10(hi)
        if self.l1 == self.l0:
            self.l1 = self.l0 + 1
        self.r0, self.r1 = pixels

    def __call__(self, v):
        return self.r0 + (math.log10(v) - self.l0) * (self.r1 - self.r0) / (self.l1 - self.l0)

    def ticks(self):
        """Powers of ten, with 2 and 5 between them when the domain spans few decades."""
        steps = (1, 2, 5) if self.l1 - self.l0 <= 3 else (1,)
        out = []
        for e in range(math.floor(self.l0), math.ceil(self.l1) + 1):
            for s in steps:
                t = s * 10.0 ** e
                if self.l0 - 1e-9 <= math.log10(t) <= self.l1 + 1e-9:
                    out.append(t)
        return out


def nice_ticks(lo, hi, count=6):
    """Round ticks (1, 2 or 5 times a power of ten) covering [lo, hi]."""
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / max(count - 1, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks, t = [], first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi - step * 1e-9:
        ticks.append(round(t, 12))
    return ticks


def nice_domain(lo, hi, from_zero=True):
    """A linear domain whose ends are round ticks, so the axes start and end on labels."""
    if from_zero:
        lo = min(lo, 0)
    if hi <= lo:
        hi = lo + 1
    ticks = nice_ticks(lo, hi)
    return ticks[0], ticks[-1]


def log_domain(lo, hi):
    """Whole decades around [lo, hi] (both positive)."""
    return 10.0 ** math.floor(math.log10(lo)), 10.0 ** math.ceil(math.log10(hi))


class _Canvas:
    """The SVG being written: its size, the plot area and its elements."""

    def __init__(self, width, height, title):
        self.width, self.height = width, height
        self.left, self.top = MARGIN["left"], MARGIN["top"]
        self.right = width - MARGIN["right"]
        self.bottom = height - MARGIN["bottom"]
        self.parts = [
            '<rect width="%d" height="%d" fill="#ffffff"/>' % (width, height),
            '<text x="%s" y="24" %s font-size="15" font-weight="bold">%s</text>'
            % (_num(self.left), FONT, escape(title)),
        ]

    def add(self, element):
        self.parts.append(element)

    def text(self, x, y, text, size=11, anchor="start", extra=""):
        self.add('<text x="%s" y="%s" %s font-size="%d" text-anchor="%s"%s>%s</text>'
                 % (_num(x), _num(y), FONT, size, anchor, extra, escape(str(text))))

    def line(self, x1, y1, x2, y2, colour="#000000", width=1, dash=None, cls=None):
        self.add('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s%s/>'
                 % (_num(x1), _num(y1), _num(x2), _num(y2), colour, width,
                    ' stroke-dasharray="%s"' % dash if dash else "",
                    ' class="%s"' % cls if cls else ""))

    def svg(self):
        head = ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">'
                % (self.width, self.height, self.width, self.height))
        return "\n".join([head] + self.parts + ["</svg>"]) + "\n"


def _axes(c, xscale, yscale, x_label, y_label, x_ticks=None):
    """The frame, grid lines at the y ticks, tick marks and labels on both axes."""
    for t in yscale.ticks():
        y = yscale(t)
        c.line(c.left, y, c.right, y, colour="#e0e0e0", cls="grid")
        c.line(c.left - 4, y, c.left, y, cls="ytick")
        c.text(c.left - 7, y + 4, format_tick(t), anchor="end", extra=' class="ytick-label"')
    if xscale is not None:
        for t in (x_ticks if x_ticks is not None else xscale.ticks()):
            x = xscale(t)
            c.line(x, c.bottom, x, c.bottom + 4, cls="xtick")
            c.text(x, c.bottom + 17, format_tick(t), anchor="middle", extra=' class="xtick-label"')
    c.line(c.left, c.bottom, c.right, c.bottom, cls="xaxis")
    c.line(c.left, c.top, c.left, c.bottom, cls="yaxis")
    c.text((c.left + c.right) / 2, c.height - 14, x_label, size=12, anchor="middle")
    c.text(18, (c.top + c.bottom) / 2, y_label, size=12, anchor="middle",
           extra=' transform="rotate(-90 18 %s)"' % _num((c.top + c.bottom) / 2))


def _legend(c, entries):
    """entries: (label, colour, style) with style 'line', 'dash', 'box' or 'band'."""
    x, y = c.right + 16, c.top + 8
    c.add('<g class="legend">')
    for label, colour, style in entries:
        if style == "line":
            c.line(x, y, x + 22, y, colour=colour, width=2)
        elif style == "dash":
            c.line(x, y, x + 22, y, colour=colour, width=2, dash="6 3")
        else:
            opacity = "0.18" if style == "band" else "1"
            c.add('<rect x="%s" y="%s" width="22" height="10" fill="%s" fill-opacity="%s"/>'
                  % (_num(x), _num(y - 5), colour, opacity))
        c.text(x + 28, y + 4, label)
        y += 18
    c.add("</g>")


def line_chart(series, title, x_label, y_label, log_y=False, bands=(), hlines=(),
               width=760, height=420):
    """Lines with a marker per point.

    series: [(name, [(x, y), ...]), ...]; points with y <= 0 are left out on a
    log scale (they cannot be placed). bands: [(x0, x1, label), ...] shaded
    behind the lines (one legend entry per distinct label). hlines: [(y,
    label), ...] dashed reference lines across the plot.
    """
    points = [(x, y) for _, pts in series for x, y in pts if not (log_y and y <= 0)]
    if not points:
        raise ValueError("a line chart needs at least one point")
    xs = [x for x, _ in points] + [b for band in bands for b in band[:2]]
    ys = [y for _, y in points] + [y for y, _ in hlines]
    c = _Canvas(width, height, title)
    xscale = LinearScale(nice_domain(min(xs), max(xs), from_zero=min(xs) >= 0),
                         (c.left, c.right))
    if log_y:
        yscale = LogScale(log_domain(min(ys), max(ys)), (c.bottom, c.top))
    else:
        yscale = LinearScale(nice_domain(min(ys), max(ys)), (c.bottom, c.top))
    legend = []
    band_labels = []
    for x0, x1, label in bands:
        c.add('<rect class="band" x="%s" y="%s" width="%s" height="%s" fill="#888888" fill-opacity="0.18"/>'
              % (_num(xscale(x0)), _num(c.top), _num(xscale(x1) - xscale(x0)), _num(c.bottom - c.top)))
        if label not in band_labels:
            band_labels.append(label)
    legend += [(label, "#888888", "band") for label in band_labels]
    _axes(c, xscale, yscale, x_label, y_label)
    for i, (name, pts) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        placed = [(xscale(x), yscale(y)) for x, y in pts if not (log_y and y <= 0)]
        if len(placed) > 1:
            c.add('<polyline class="series s%d" fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                  % (i, colour, " ".join("%s,%s" % (_num(px), _num(py)) for px, py in placed)))
        for (x, y), (px, py) in zip([p for p in pts if not (log_y and p[1] <= 0)], placed):
            c.add('<circle class="point s%d" cx="%s" cy="%s" r="3" fill="%s" data-x="%s" data-y="%s"/>'
                  % (i, _num(px), _num(py), colour, _attr(x), _attr(y)))
        legend.append((name, colour, "line"))
    for y, label in hlines:
        c.line(c.left, yscale(y), c.right, yscale(y), colour="#555555", width=1.5, dash="6 3", cls="hline")
        legend.append((label, "#555555", "dash"))
    _legend(c, legend)
    return c.svg()


def bar_chart(groups, title, y_label, ref_label="nginx", width=None, height=420):
    """Bars grouped by scenario, each group with an optional reference line.

    groups: [(group_name, [(bar_label, value), ...], ref_value_or_None), ...].
    A group's reference value (nginx's CPU per call in the same run, say) is
    drawn as a dashed line across that group's bars only, since each scenario
    measured its own baseline.
    """
    bars = [v for _, items, _ in groups for _, v in items]
    if not bars:
        raise ValueError("a bar chart needs at least one bar")
    refs = [r for _, _, r in groups if r is not None]
    n_bars = sum(len(items) for _, items, _ in groups)
    if width is None:
        width = max(640, MARGIN["left"] + MARGIN["right"] + 46 * n_bars + 30 * len(groups))
    c = _Canvas(width, height + LABEL_ROOM, title)
    c.bottom -= LABEL_ROOM  # room for the bar labels, turned, and the group names under them
    yscale = LinearScale(nice_domain(0, max(bars + refs)), (c.bottom, c.top))
    _axes(c, None, yscale, "", y_label)
    slot = (c.right - c.left) / (n_bars + len(groups))
    x = c.left + slot / 2
    for gi, (gname, items, ref) in enumerate(groups):
        colour = COLOURS[gi % len(COLOURS)]
        g_start = x
        for label, value in items:
            top = yscale(value)
            c.add('<rect class="bar g%d" x="%s" y="%s" width="%s" height="%s" fill="%s" data-value="%s"/>'
                  % (gi, _num(x + slot * 0.1), _num(top), _num(slot * 0.8), _num(c.bottom - top),
                     colour, _attr(value)))
            c.text(x + slot / 2, top - 4, "%.1f" % value, size=10, anchor="middle")
            lx, ly = x + slot / 2, c.bottom + 10
            c.text(lx, ly, label, size=10, anchor="end",
                   extra=' transform="rotate(-35 %s %s)"' % (_num(lx), _num(ly)))
            x += slot
        if ref is not None:
            c.line(g_start, yscale(ref), x, yscale(ref), colour="#555555", width=1.5, dash="6 3",
                   cls="ref g%d" % gi)
        c.text((g_start + x) / 2, c.bottom + LABEL_ROOM + 20, gname, size=11, anchor="middle",
               extra=' font-weight="bold"')
        x += slot
    legend = [(gname, COLOURS[gi % len(COLOURS)], "box") for gi, (gname, _, _) in enumerate(groups)]
    if refs:
        legend.append((ref_label + " (same run)", "#555555", "dash"))
    _legend(c, legend)
    return c.svg()
