package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"github.com/brp/levering/levering"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// chart draws handelingen per second against the number of mutatielevering processes (one
// tick each, evenly spaced), with the raw loop at the same concurrency and seed mode for
// reference, as an SVG document (gonum.org/v1/plot); the pipeline's points carry their values.
func chart(r *results) (string, error) {
	type series struct {
		label  string
		color  uint32
		dashes []vg.Length // none: the pipeline
		pts    plotter.XYs // x: the tick's index
	}
	var ks []float64 // the consumer counts measured, one tick each
	pipe := series{label: "pipeline", color: 0x1f5fbf}
	raw1 := series{label: "raw loop, 1 item per transaction", color: 0xe07b00, dashes: []vg.Length{6, 4}}
	rawN := series{label: "raw loop, batches of " + r.cfg["raw-batch"], color: 0x2a9d3a, dashes: []vg.Length{6, 4}}
	seed := series{label: "seed mode (a round every 5 s)", color: 0xc0392b, dashes: []vg.Length{2, 4}}
	top := 1.0
	add := func(s *series, x float64, m map[string]float64) {
		if m != nil {
			s.pts = append(s.pts, plotter.XY{X: x, Y: m["hps"]})
			top = max(top, m["hps"])
		}
	}
	for i, x := range r.under("pipeline/consumers=") {
		k, _ := strconv.ParseFloat(x.name, 64)
		ks = append(ks, k)
		g := int(k) * levering.DefaultWorkers
		add(&pipe, float64(i), x.m)
		add(&raw1, float64(i), r.get(fmt.Sprintf("raw/batch=1/goroutines=%d", g)))
		add(&rawN, float64(i), r.get(fmt.Sprintf("raw/batch=%s/goroutines=%d", r.cfg["raw-batch"], g)))
		add(&seed, float64(i), r.get("seed"))
	}
	// A labelled grid line every step: a power of ten, or half of one when that gives too few.
	step := 1.0
	for step*10 < top {
		step *= 10
	}
	if top/step < 4 {
		step /= 2
	}

	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput: 1 publicatie + K mutatielevering (default settings)\n%s · %s CPUs · %s",
		r.cfg["workload"], r.cfg["cpus"], r.cfg["date"])
	p.Title.TextStyle.Font.Size = 15
	p.X.Label.Text = fmt.Sprintf("mutatielevering processes (%d workers each; the raw loop at as many goroutines)", levering.DefaultWorkers)
	p.Y.Label.Text = "handelingen (items) per second"
	p.X.Min, p.X.Max = -0.3, float64(len(ks)-1)+0.3
	p.Y.Min, p.Y.Max = 0, (math.Floor(top*1.05/step)+1)*step
	var xticks, yticks []plot.Tick
	for i, k := range ks {
		xticks = append(xticks, plot.Tick{Value: float64(i), Label: strconv.FormatFloat(k, 'g', -1, 64)})
	}
	for v := 0.0; v <= p.Y.Max; v += step {
		yticks = append(yticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.ConstantTicks(xticks), plot.ConstantTicks(yticks)
	p.Add(&plotter.Grid{Horizontal: draw.LineStyle{Color: color.Gray{Y: 0xdd}, Width: 0.5}})
	legend := plot.NewLegend()
	legend.Top, legend.Left, legend.Padding = true, true, 8
	for _, s := range []series{rawN, raw1, pipe, seed} {
		if len(s.pts) == 0 {
			continue
		}
		c := color.RGBA{R: uint8(s.color >> 16), G: uint8(s.color >> 8), B: uint8(s.color), A: 0xff}
		line, points, err := plotter.NewLinePoints(s.pts)
		if err != nil {
			return "", err
		}
		line.Color, line.Dashes, line.Width = c, s.dashes, 2
		legend.Add(s.label, line)
		if s.dashes != nil {
			p.Add(line)
			continue
		}
		line.Width, points.Color, points.Shape, points.Radius = 3, c, draw.CircleGlyph{}, 4
		values := plotter.XYLabels{XYs: s.pts}
		for _, pt := range s.pts {
			values.Labels = append(values.Labels, strconv.FormatFloat(pt.Y, 'f', 0, 64))
		}
		labels, err := plotter.NewLabels(values)
		if err != nil {
			return "", err
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].Color, labels.TextStyle[i].XAlign = c, draw.XCenter
		}
		labels.Offset.Y = 8
		p.Add(line, points, labels)
	}
	// The legend has a column of its own on the right, clear of the lines.
	const legendWidth = 3.2 * vg.Inch
	canvas := vgsvg.New(12*vg.Inch, 6*vg.Inch)
	dc := draw.New(canvas)
	p.Draw(draw.Crop(dc, 0, -legendWidth, 0, 0))
	legend.Draw(draw.Crop(dc, dc.Max.X-legendWidth+16, 0, 0, -50))
	var b bytes.Buffer
	_, err := canvas.WriteTo(&b)
	return b.String(), err
}
