package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// apiserver_request_total has no client label, so which process wrote what
// comes from kube-apiserver's audit log instead: one line per mutating
// request (Metadata level, no bodies), naming its user agent. Every process
// of ours sets its own (address-controller, metallb-iad); MetalLB's
// controller sends client-go's default, named after its binary.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

// auditFlags are kube-apiserver's flags for that log. Its default,
// blocking mode writes each line before the request completes, under one
// lock: on this 2-core host that cost about a tenth of a bind's rate, and
// a bind is audited four times to a ConfigMap create's once, so the log
// weighed on the figures it explains. Batch mode writes from its own
// goroutine, a line at a time (batch size 1), and drops a line only when
// 10,000 wait; the breakdown's total is printed against
// apiserver_request_total's, so a dropped line would show.
func auditFlags(policyPath, logPath string) map[string][]string {
	return map[string][]string{
		"audit-policy-file": {policyPath},
		"audit-log-path":    {logPath},
		"audit-log-format":  {"json"},
		// Never rotated (its default is at 100 MB, which a large phase
		// passes): offsets into it date the phases.
		"audit-log-maxsize": {"100000"},
		"audit-log-mode":    {"batch"},
	}
}

// auditKey is one row of the breakdown by client.
type auditKey struct {
	agent, resource, verb string
}

// auditCounts maps each row to its count.
type auditCounts map[auditKey]requestCount

// auditEvent is what the breakdown reads of an audit log line.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// auditSize is the audit log's length: the offset a later readAudit starts
// from. A missing log reads as empty.
func auditSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// readAudit counts the completed requests logged between two offsets.
func readAudit(path string, from, to int64) (auditCounts, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	s := bufio.NewScanner(io.LimitReader(f, to-from))
	s.Buffer(make([]byte, 0, 64<<10), 4<<20)
	out := auditCounts{}
	for s.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", path, err)
		}
		if ev.Stage != "ResponseComplete" {
			continue
		}
		k := auditKey{agent: agentName(ev.UserAgent), resource: auditResource(ev), verb: ev.Verb}
		c := out[k]
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code/100 == 2 {
			c.ok++
		} else {
			c.failed++
		}
		out[k] = c
	}
	return out, s.Err()
}

// agentName is a user agent's product, the part before the first "/":
// "address-controller", or "controller" for client-go's default in
// MetalLB's controller binary.
func agentName(ua string) string {
	name, _, _ := strings.Cut(ua, "/")
	if name == "" {
		return "(none)"
	}
	return name
}

// auditResource spells a request's resource as requestKey does.
func auditResource(ev auditEvent) string {
	if ev.ObjectRef == nil {
		return "(none)"
	}
	k := requestKey{group: ev.ObjectRef.APIGroup, resource: ev.ObjectRef.Resource, subresource: ev.ObjectRef.Subresource}
	return k.String()
}

// total sums every row.
func (a auditCounts) total() float64 {
	var t float64
	for _, c := range a {
		t += c.total()
	}
	return t
}

// byAgent sums the rows of each agent.
func (a auditCounts) byAgent() map[string]float64 {
	out := map[string]float64{}
	for k, c := range a {
		out[k.agent] += c.total()
	}
	return out
}

// sorted returns the rows grouped by agent, the busiest agent first, and
// within an agent the largest row first.
func (a auditCounts) sorted() []auditKey {
	agents := a.byAgent()
	keys := make([]auditKey, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ki, kj := keys[i], keys[j]
		if ai, aj := agents[ki.agent], agents[kj.agent]; ai != aj {
			return ai > aj
		}
		if ki.agent != kj.agent {
			return ki.agent < kj.agent
		}
		if ci, cj := a[ki].total(), a[kj].total(); ci != cj {
			return ci > cj
		}
		if ki.resource != kj.resource {
			return ki.resource < kj.resource
		}
		return ki.verb < kj.verb
	})
	return keys
}
