package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// leaseDuration is controller-runtime's default, which the binaries keep:
// a leader paused longer than this has been replaced when it wakes.
const leaseDuration = 15 * time.Second

// A fault and what it does; each returns once the system is whole again
// (what it stopped is started, resumed or restarted).
type fault struct {
	name   string
	weight int
	inject func(ctx context.Context, i *injector) error
}

// faults are the kinds a run injects, each at least once, then at random
// by weight.
var faults = []fault{
	{"kill -9 the core's leader", 3, func(ctx context.Context, i *injector) error {
		return i.killLeader(ctx, "manager-")
	}},
	{"kill -9 the driver's leader", 3, func(ctx context.Context, i *injector) error {
		return i.killLeader(ctx, "driver-")
	}},
	{"SIGSTOP the core's leader past its lease", 1, func(ctx context.Context, i *injector) error {
		return i.pauseLeader(ctx, "manager-")
	}},
	{"SIGSTOP the driver's leader past its lease", 1, func(ctx context.Context, i *injector) error {
		return i.pauseLeader(ctx, "driver-")
	}},
	{"kill -9 MetalLB's controller", 2, func(ctx context.Context, i *injector) error {
		i.s.kill(metalLBName)
		sleep(ctx, i.between(500*time.Millisecond, 3*time.Second))
		i.s.start(metalLBName)
		return nil
	}},
	{"restart kube-apiserver", 2, func(ctx context.Context, i *injector) error {
		return i.s.cp.RestartAPIServer(ctx, i.between(500*time.Millisecond, 3*time.Second))
	}},
	{"both managers down for 30s", 1, func(ctx context.Context, i *injector) error {
		names := i.s.names("manager-")
		for _, n := range names {
			i.s.kill(n)
		}
		sleep(ctx, 30*time.Second)
		for _, n := range names {
			i.s.start(n)
		}
		return nil
	}},
}

// injector injects faults from the seed.
type injector struct {
	s   *system
	rng *rand.Rand
	// every is the pause between two faults.
	every time.Duration
	// count is how many of each kind were survived; log, what happened when.
	count map[string]int
	log   []string
}

// run injects faults until the deadline and until at least atLeast were
// injected: first each kind once, in an order the seed picks, then kinds
// by weight.
func (i *injector) run(ctx context.Context, deadline time.Time, atLeast int) {
	order := i.rng.Perm(len(faults))
	total := 0
	for n := 0; ctx.Err() == nil && (time.Now().Before(deadline) || n < atLeast); n++ {
		sleep(ctx, i.every)
		f := i.pick(n, order, &total)
		start := time.Now()
		if err := f.inject(ctx, i); err != nil {
			i.s.t.Errorf("%s: %v", f.name, err)
			return
		}
		i.count[f.name]++
		i.log = append(i.log, fmt.Sprintf("%s %s (%s)", start.Format("15:04:05.000"), f.name, time.Since(start).Round(100*time.Millisecond)))
	}
}

func (i *injector) pick(n int, order []int, total *int) fault {
	if n < len(order) {
		return faults[order[n]]
	}
	if *total == 0 {
		for _, f := range faults {
			*total += f.weight
		}
	}
	r := i.rng.IntN(*total)
	for _, f := range faults {
		if r -= f.weight; r < 0 {
			return f
		}
	}
	return faults[0]
}

// leaderOf waits for the process among prefix's to lead.
func (i *injector) leaderOf(ctx context.Context, prefix string) (string, error) {
	deadline := time.Now().Add(2 * leaseDuration)
	for time.Now().Before(deadline) {
		if l := i.s.leader(i.s.names(prefix)...); l != "" {
			return l, nil
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return "", fmt.Errorf("no leader among %s* within %s", prefix, 2*leaseDuration)
}

func (i *injector) killLeader(ctx context.Context, prefix string) error {
	l, err := i.leaderOf(ctx, prefix)
	if err != nil {
		return err
	}
	i.s.kill(l)
	sleep(ctx, i.between(500*time.Millisecond, 3*time.Second))
	i.s.start(l)
	return nil
}

// pauseLeader stops the leader longer than its lease: another takes over,
// and when it wakes it still believes it leads until it fails to renew —
// for a moment two leaders act.
func (i *injector) pauseLeader(ctx context.Context, prefix string) error {
	l, err := i.leaderOf(ctx, prefix)
	if err != nil {
		return err
	}
	i.s.pause(l)
	sleep(ctx, leaseDuration+i.between(2*time.Second, 6*time.Second))
	i.s.resume(l)
	return nil
}

func (i *injector) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(i.rng.Int64N(int64(hi-lo)))
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
