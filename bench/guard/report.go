package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"slices"
	"strings"
)

// run is one measurement: one metric, one round, one target.
type run struct {
	Metric string `json:"metric"`
	Round  int    `json:"round"`
	Target string `json:"target"` // A, B or K
	// Value is the metric's figure: records/s, µs/record or p99 ms.
	Value          float64 `json:"value"`
	AckedPerSec    float64 `json:"ackedPerSec"`
	SentPerSec     float64 `json:"sentPerSec"`
	P50Ms          float64 `json:"p50Ms"`
	P99Ms          float64 `json:"p99Ms"`
	MaxMs          float64 `json:"maxMs"`
	CPUSeconds     float64 `json:"cpuSeconds"`
	CPUPerRecordUs float64 `json:"cpuPerRecordUs"`
	Dropped        int64   `json:"dropped,omitempty"`
	Errors         int64   `json:"errors,omitempty"`
	FirstErr       string  `json:"firstError,omitempty"`
}

func (r run) summary(m metric) string {
	s := fmt.Sprintf("%s %s  (acked %s/s, p50 %.1f ms, p99 %.1f ms, cpu %.2f µs/record)",
		format(m, r.Value), m.Unit, thousands(r.AckedPerSec), r.P50Ms, r.P99Ms, r.CPUPerRecordUs)
	if r.Dropped > 0 || r.Errors > 0 {
		s += fmt.Sprintf(" dropped %d errors %d", r.Dropped, r.Errors)
	}
	return s
}

// summary is one metric over every round.
type summary struct {
	Metric       string `json:"metric"`
	Unit         string `json:"unit"`
	Rate         int    `json:"rate,omitempty"`
	HigherBetter bool   `json:"higherBetter"`
	// Median is each target's median figure; P50Median the latency's p50.
	Median    map[string]float64 `json:"median"`
	P50Median map[string]float64 `json:"p50Median,omitempty"`
	// Ratio is the median of the rounds' ratios B/A, A/K and B/K, and
	// Range their lowest and highest.
	Ratio map[string]float64    `json:"ratio"`
	Range map[string][2]float64 `json:"range"`
}

type report struct {
	A       build     `json:"a"`
	B       build     `json:"b"`
	K       string    `json:"k"`
	Rounds  int       `json:"rounds"`
	CPUs    int       `json:"cpus"`
	Load    string    `json:"load"`
	Started string    `json:"started"`
	Summary []summary `json:"summary"`
	Runs    []run     `json:"runs"`
}

var ratios = [][3]string{{"B/A", "B", "A"}, {"A/K", "A", "K"}, {"B/K", "B", "K"}}

func (rep *report) summarise(ms []metric) {
	for _, m := range ms {
		s := summary{Metric: m.Key, Unit: m.Unit, Rate: m.Rate, HigherBetter: m.HigherBetter,
			Median: map[string]float64{}, Ratio: map[string]float64{}, Range: map[string][2]float64{}}
		for _, t := range []string{"A", "B", "K"} {
			var v, p50 []float64
			for _, r := range rep.Runs {
				if r.Metric == m.Key && r.Target == t {
					v = append(v, r.Value)
					p50 = append(p50, r.P50Ms)
				}
			}
			s.Median[t] = median(v)
			if m.Key == "latency" {
				if s.P50Median == nil {
					s.P50Median = map[string]float64{}
				}
				s.P50Median[t] = median(p50)
			}
		}
		for _, q := range ratios {
			var rs []float64
			for round := 1; round <= rep.Rounds; round++ {
				if x, ok := rep.ratio(m.Key, round, q[1], q[2]); ok {
					rs = append(rs, x)
				}
			}
			if len(rs) > 0 {
				s.Ratio[q[0]] = median(rs)
				s.Range[q[0]] = [2]float64{slices.Min(rs), slices.Max(rs)}
			}
		}
		rep.Summary = append(rep.Summary, s)
	}
}

// ratio is num's figure over den's in one round of one metric.
func (rep *report) ratio(metric string, round int, num, den string) (float64, bool) {
	n, okN := rep.value(metric, round, num)
	d, okD := rep.value(metric, round, den)
	if !okN || !okD || d == 0 {
		return 0, false
	}
	return n / d, true
}

func (rep *report) value(metric string, round int, target string) (float64, bool) {
	for _, r := range rep.Runs {
		if r.Metric == metric && r.Round == round && r.Target == target {
			return r.Value, true
		}
	}
	return 0, false
}

func (rep *report) writeJSON(w io.Writer) error {
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func (rep *report) writeTables(w io.Writer, ms []metric) {
	fmt.Fprintf(w, "A  %s\nB  %s\n", rep.A.Label, rep.B.Label)
	for _, d := range rep.B.Dirty {
		fmt.Fprintf(w, "     %s\n", d)
	}
	fmt.Fprintf(w, "K  %s\n", rep.K)
	fmt.Fprintf(w, "load: %s\n", rep.Load)
	fmt.Fprintf(w, "%d rounds on %d CPUs, started %s; ratios are medians of the rounds' ratios (lowest-highest)\n",
		rep.Rounds, rep.CPUs, rep.Started)
	for i, m := range ms {
		s := rep.Summary[i]
		fmt.Fprintf(w, "\n%s\n", m.Title)
		fmt.Fprintf(w, "%-6s %-6s %14s %14s %14s %8s %8s %8s\n", "round", "order", "A", "B", "K", "B/A", "A/K", "B/K")
		var notes []string
		for round := 1; round <= rep.Rounds; round++ {
			var order []string
			cells := map[string]string{}
			for _, r := range rep.Runs {
				if r.Metric != m.Key || r.Round != round {
					continue
				}
				order = append(order, r.Target)
				cells[r.Target] = cell(m, r.Value, r.P50Ms)
				if n := shortfall(m, r); n != "" {
					notes = append(notes, fmt.Sprintf("round %d %s: %s", round, r.Target, n))
				}
			}
			fmt.Fprintf(w, "%-6d %-6s %14s %14s %14s", round, strings.Join(order, ""), cells["A"], cells["B"], cells["K"])
			for _, q := range ratios {
				if x, ok := rep.ratio(m.Key, round, q[1], q[2]); ok {
					fmt.Fprintf(w, " %8.3f", x)
				} else {
					fmt.Fprintf(w, " %8s", "-")
				}
			}
			fmt.Fprintln(w)
		}
		p50 := func(t string) float64 { return s.P50Median[t] }
		fmt.Fprintf(w, "%-13s %14s %14s %14s", "median", cell(m, s.Median["A"], p50("A")), cell(m, s.Median["B"], p50("B")), cell(m, s.Median["K"], p50("K")))
		for _, q := range ratios {
			fmt.Fprintf(w, " %8.3f", s.Ratio[q[0]])
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "%-58s", "ratio range")
		for _, q := range ratios {
			r := s.Range[q[0]]
			fmt.Fprintf(w, " %8s", fmt.Sprintf("%.2f-%.2f", r[0], r[1]))
		}
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintf(w, "  ! %s\n", n)
		}
	}
	fmt.Fprintln(w)
	var parts []string
	for i, m := range ms {
		x := rep.Summary[i].Ratio["B/A"]
		better := "better"
		if (x < 1) == m.HigherBetter {
			better = "worse"
		}
		if x == 1 {
			better = "same"
		}
		parts = append(parts, fmt.Sprintf("%s %+.1f%% (%s)", m.Key, (x-1)*100, better))
	}
	fmt.Fprintf(w, "B against A: %s\n", strings.Join(parts, ", "))
	fmt.Fprintln(w, "Read a B/A change as real only when it is larger than the spread of the rounds' B/A and A/K does not move with it.")
}

// shortfall says why a fixed-rate run did not carry its rate, "" if it did.
func shortfall(m metric, r run) string {
	var why []string
	if m.Rate > 0 && r.AckedPerSec < 0.95*float64(m.Rate) {
		why = append(why, fmt.Sprintf("acknowledged %s records/s of %s sent at", thousands(r.AckedPerSec), thousands(float64(m.Rate))))
	}
	if r.Dropped > 0 {
		why = append(why, fmt.Sprintf("%d records dropped for a full client buffer", r.Dropped))
	}
	if r.Errors > 0 {
		why = append(why, fmt.Sprintf("%d records failed (%s)", r.Errors, r.FirstErr))
	}
	return strings.Join(why, "; ")
}

func cell(m metric, v, p50 float64) string {
	if m.Key == "latency" {
		return fmt.Sprintf("%s (%.1f)", format(m, v), p50)
	}
	return format(m, v)
}

func format(m metric, v float64) string {
	switch m.Key {
	case "throughput":
		return thousands(v)
	case "cpu":
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

// thousands is v rounded, with commas between thousands.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", math.Round(v))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// kfakeVersion is the version of kfake built into this program.
func kfakeVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/twmb/franz-go/pkg/kfake" {
				return d.Version
			}
		}
	}
	return "(version unknown)"
}
