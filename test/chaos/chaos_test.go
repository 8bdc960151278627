package chaos

import (
	"context"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// The run's knobs, from the environment (make chaos sets them). Without
// CHAOS_DURATION the bounded run of make test: two minutes and at least
// eight faults, every kind among them, from a fixed seed (make chaos picks
// a new one each run).
const (
	envDuration  = "CHAOS_DURATION"    // e.g. 5m
	envSeed      = "CHAOS_SEED"        // default: the time
	envEvery     = "CHAOS_FAULT_EVERY" // the pause between two faults
	envMinFaults = "CHAOS_MIN_FAULTS"  // faults go on past the duration until this many
)

type config struct {
	duration, every time.Duration
	seed            uint64
	minFaults       int
}

func configure(t *testing.T) config {
	c := config{duration: 2 * time.Minute, every: 4 * time.Second, seed: 1, minFaults: 8}
	if os.Getenv(envDuration) != "" {
		c.seed = uint64(time.Now().UnixNano())
	}
	if testing.Short() && os.Getenv(envDuration) == "" {
		t.Skip("the chaos run takes minutes; -short skips it (make chaos runs the full one)")
	}
	var err error
	for env, parse := range map[string]func(string) error{
		envDuration: func(v string) error { c.duration, err = time.ParseDuration(v); return err },
		envEvery:    func(v string) error { c.every, err = time.ParseDuration(v); return err },
		envSeed:     func(v string) error { c.seed, err = strconv.ParseUint(v, 10, 64); return err },
		envMinFaults: func(v string) error {
			c.minFaults, err = strconv.Atoi(v)
			return err
		},
	} {
		if v := os.Getenv(env); v != "" {
			if err := parse(v); err != nil {
				t.Fatalf("%s=%q: %v", env, v, err)
			}
		}
	}
	return c
}

// TestChaos runs the shipped binaries — two managers and two drivers, each
// as its ServiceAccount, leader election on, the core's webhooks and the
// driver's policies installed — with MetalLB's controller, through a
// seeded churn while faults kill, pause and restart leaders, MetalLB and
// the API server. A ledger judges every change as the watches report it
// and counts each instant that breaks an invariant. Then faults and churn
// stop, and everything must settle, with nothing leaked and no write left
// to do.
func TestChaos(t *testing.T) {
	cfg := configure(t)
	t.Logf("seed %d, %s, a fault every %s, at least %d faults (replay: %s=%d)", cfg.seed, cfg.duration, cfg.every, cfg.minFaults, envSeed, cfg.seed)
	ctx, cancel := context.WithTimeout(t.Context(), cfg.duration+15*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9e3779b97f4a7c15))

	s := newSystem(ctx, t, options{managers: 2, drivers: 2, leaderElection: true})
	w := &workload{s: s, rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), ops: map[string]int{}}
	w.setup(ctx)
	ledger := NewLedger(driverNS, func(class string) bool { return class == retainClass || class == deleteClass })
	ledger.Pools = poolPrefixes()
	ledger.Trace = s.logFile("changes")
	f := &feed{c: s.admin, l: ledger}
	stopFeed := f.watch(ctx)

	start := time.Now()
	churn, stopChurn := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.run(churn) })
	inj := &injector{s: s, rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), every: cfg.every, count: map[string]int{}}
	inj.run(ctx, start.Add(cfg.duration), cfg.minFaults)
	stopChurn()
	wg.Wait()
	ran := time.Since(start)

	settle, problems := s.quiescent(ctx, 3*time.Minute)
	idle, idleBy, idleChanges := -1, map[string]int(nil), []string(nil)
	if len(problems) == 0 {
		stopMark := f.since()
		idle, idleBy = s.idleWrites(ctx, 30*time.Second)
		idleChanges = stopMark()
	}
	stopFeed()

	t.Logf("ran %s with seed %d", ran.Round(time.Second), cfg.seed)
	total := 0
	for _, name := range slices.Sorted(maps.Keys(inj.count)) {
		t.Logf("  fault %-45s %d", name, inj.count[name])
		total += inj.count[name]
	}
	t.Logf("  faults survived: %d; exits restarted by the supervisor: %v", total, s.restarts)
	for _, op := range slices.Sorted(maps.Keys(w.ops)) {
		t.Logf("  %-40s %d", op, w.ops[op])
	}
	t.Logf("  changes judged: %d; watches listed again after the API server lost their history: %d (%d changes in their blind spots)",
		ledger.Events, f.relists, ledger.Blind)
	for _, inv := range Invariants {
		t.Logf("  invariant %-40s violated %d", inv, ledger.Violations[inv])
	}
	t.Logf("  settled in %s; idle writes in 30s: %d %v", settle.Round(time.Second), idle, idleBy)

	for _, n := range ledger.Notes {
		t.Error(n)
	}
	if total < cfg.minFaults {
		t.Errorf("%d faults injected, want at least %d", total, cfg.minFaults)
	}
	if len(problems) > 0 {
		t.Errorf("did not settle in %s:\n  %s", settle.Round(time.Second), strings.Join(problems, "\n  "))
	}
	// One write a minute (a requeued pass, an event's series) is noise,
	// and so is one deferred status write per class (its counts and
	// capacity are written at most once per interval); more is a
	// controller that never rests.
	var classes v1alpha1.IPAddressClassList
	if err := s.admin.List(ctx, &classes); err != nil {
		t.Error(err)
	}
	if statusWrites := idleBy["PUT ipaddressclasses/status"]; idle-statusWrites > 1 || statusWrites > len(classes.Items) {
		t.Errorf("%d writes in 30s of quiescence, want none; what changed:\n  %s", idle, strings.Join(idleChanges, "\n  "))
	}
	if t.Failed() {
		t.Logf("faults, in order:\n  %s", strings.Join(inj.log, "\n  "))
		s.dumpWarnings()
		t.Logf("replay: CHAOS_SEED=%d CHAOS_DURATION=%s make chaos (the workload and faults follow the seed; timing does not)", cfg.seed, cfg.duration)
	}
}

// idleWrites counts the writes of the controllers' resources over window,
// by verb and resource.
func (s *system) idleWrites(ctx context.Context, window time.Duration) (int, map[string]int) {
	before, err := s.writes(ctx)
	if err != nil {
		s.t.Error(err)
		return -1, nil
	}
	sleep(ctx, window)
	after, err := s.writes(ctx)
	if err != nil {
		s.t.Error(err)
		return -1, nil
	}
	by := diff(before, after)
	total := 0
	for _, n := range by {
		total += n
	}
	return total, by
}

// dumpWarnings logs the warning events the controllers recorded.
func (s *system) dumpWarnings() {
	var evs eventsv1.EventList
	if err := s.admin.List(s.ctx, &evs); err != nil {
		return
	}
	for _, e := range evs.Items {
		if e.Type == corev1.EventTypeWarning && e.ReportingController != "metallb-controller" {
			n := int32(1)
			if e.Series != nil {
				n = e.Series.Count
			}
			s.t.Logf("event %s %s %s/%s (x%d): %s", e.ReportingController, e.Reason, e.Regarding.Namespace, e.Regarding.Name, n, e.Note)
		}
	}
}
