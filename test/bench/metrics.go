package main

import (
	"bufio"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// requestMetric is kube-apiserver's request counter.
const requestMetric = "apiserver_request_total"

// mutatingVerbs are the verbs of apiserver_request_total that write: APPLY is
// how the metric reports a server-side-apply PATCH.
var mutatingVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true}

// requestKey is one row of the breakdown.
type requestKey struct {
	group, resource, subresource, verb string
}

func (k requestKey) String() string {
	s := k.resource
	if k.group != "" {
		s += "." + k.group
	}
	if k.subresource != "" {
		s += "/" + k.subresource
	}
	return s
}

// requestCount counts requests answered 2xx and the rest (mostly 409
// Conflict for writes).
type requestCount struct {
	ok, failed float64
}

func (c requestCount) total() float64 { return c.ok + c.failed }

// requests maps each row to its count.
type requests map[requestKey]requestCount

// cpuMetric is the process collector's CPU time, in seconds.
const cpuMetric = "process_cpu_seconds_total"

// snapshot is what one scrape of kube-apiserver's metrics tells.
type snapshot struct {
	writes requests
	// cpu is kube-apiserver's CPU time in seconds; negative when the
	// metric is missing.
	cpu float64
	// audit is the audit log's length at the scrape: where the requests
	// made after it start.
	audit int64
}

// parseMetrics reads the mutating requests of apiserver_request_total,
// summed over the labels the breakdown does not show (version, scope,
// component, dry_run), and the CPU time.
func parseMetrics(metricsText string) (snapshot, error) {
	snap := snapshot{writes: requests{}, cpu: -1}
	s := bufio.NewScanner(strings.NewReader(metricsText))
	s.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for s.Scan() {
		line := s.Text()
		if rest, ok := strings.CutPrefix(line, cpuMetric+" "); ok {
			if fields := strings.Fields(rest); len(fields) > 0 {
				if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
					snap.cpu = v
				}
			}
			continue
		}
		rest, ok := strings.CutPrefix(line, requestMetric+"{")
		if !ok {
			continue
		}
		labels, value, err := parseSample(rest)
		if err != nil {
			return snap, fmt.Errorf("parsing %q: %w", line, err)
		}
		if !mutatingVerbs[labels["verb"]] {
			continue
		}
		k := requestKey{group: labels["group"], resource: labels["resource"], subresource: labels["subresource"], verb: labels["verb"]}
		c := snap.writes[k]
		if strings.HasPrefix(labels["code"], "2") {
			c.ok += value
		} else {
			c.failed += value
		}
		snap.writes[k] = c
	}
	if err := s.Err(); err != nil {
		return snap, err
	}
	if len(snap.writes) == 0 {
		return snap, fmt.Errorf("no mutating %s samples in kube-apiserver's metrics", requestMetric)
	}
	return snap, nil
}

// parseSample parses what follows "name{" in a Prometheus text-format
// sample: the labels, "}", the value and an optional timestamp.
func parseSample(s string) (map[string]string, float64, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,")
		if rest, ok := strings.CutPrefix(s, "}"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return nil, 0, fmt.Errorf("no value")
			}
			v, err := strconv.ParseFloat(fields[0], 64)
			return labels, v, err
		}
		name, rest, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(rest, `"`) {
			return nil, 0, fmt.Errorf("malformed labels")
		}
		var value strings.Builder
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case 'n':
					value.WriteByte('\n')
				default:
					value.WriteByte(rest[i])
				}
				continue
			}
			value.WriteByte(rest[i])
		}
		if i >= len(rest) {
			return nil, 0, fmt.Errorf("unterminated label value")
		}
		labels[strings.TrimSpace(name)] = value.String()
		s = rest[i+1:]
	}
}

// since returns r minus before, dropping rows that did not move.
func (r requests) since(before requests) requests {
	out := requests{}
	for k, c := range r {
		d := requestCount{ok: c.ok - before[k].ok, failed: c.failed - before[k].failed}
		if d.total() != 0 {
			out[k] = d
		}
	}
	return out
}

// total sums every row.
func (r requests) total() float64 {
	var t float64
	for _, c := range r {
		t += c.total()
	}
	return t
}

// sorted returns the rows, largest first.
func (r requests) sorted() []requestKey {
	keys := make([]requestKey, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if a, b := r[keys[i]].total(), r[keys[j]].total(); a != b {
			return a > b
		}
		if a, b := keys[i].String(), keys[j].String(); a != b {
			return a < b
		}
		return keys[i].verb < keys[j].verb
	})
	return keys
}
