package retry

import (
	"errors"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The backoff of one item: the first retry after First, doubling up to Max.
// First is short because most races end as soon as the cache catches up;
// Max bounds what a lasting conflict costs (one pass per Max).
const (
	First = 5 * time.Millisecond
	Max   = 30 * time.Second
)

// Again is the result of a pass that must run again: the item is requeued
// through the controller's rate limiter (RateLimiter), so each retry of the
// same item waits twice as long as the one before.
func Again() (reconcile.Result, error) {
	// Requeue is the one result that goes through the rate limiter without
	// being logged as an error; its deprecation steers away from it for
	// waiting on external events, which this is not.
	return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // see above
}

// OnConflict ends a pass on err: again (Again) when it lost a race for an
// object's version, with err otherwise.
func OnConflict(err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		return Again()
	}
	return reconcile.Result{}, err
}

// Told marks err as told already: the pass recorded its cause as a
// Warning Event on the object it concerns (a tenant's full quota, an
// admission policy refusing a write). End retries it with the same backoff
// but without controller-runtime's "Reconciler error" line and stack trace
// at every retry, which would say again, for good, what the object's owner
// has been shown, and crowd out the errors nobody has.
func Told(err error) error {
	if err == nil {
		return nil
	}
	return told{err}
}

type told struct{ error }

func (t told) Unwrap() error { return t.error }

// Refusal reports whether err is the API server refusing a write for what
// it says — admission (a webhook, a policy, a quota), validation, a
// namespace being deleted — the kind of cause a pass tells on the object
// and then retries quietly (Told). The authorizer refusing the caller is
// not one: that is the operator's RBAC to fix, and stays an error, logged
// and counted, never told to an object's owner.
func Refusal(err error) bool {
	if apierrors.IsInvalid(err) {
		return true
	}
	return apierrors.IsForbidden(err) && !unauthorized(err)
}

// unauthorized reports whether a Forbidden is the authorizer's: its
// message is "<resource> is forbidden: User "<name>" cannot <verb> ...".
func unauthorized(err error) bool {
	msg := err.Error()
	_, rest, ok := strings.Cut(msg, `is forbidden: User "`)
	return ok && strings.Contains(rest, `" cannot `)
}

// IsTold reports whether err, or an error it wraps, was Told.
func IsTold(err error) bool { return errors.As(err, new(told)) }

// End ends a pass on err: again (Again) when it lost a race for an
// object's version or its cause was Told, with err otherwise.
func End(err error) (reconcile.Result, error) {
	if IsTold(err) {
		return Again()
	}
	return OnConflict(err)
}

// RateLimiter is the per-item exponential backoff every controller of this
// repository uses. Unlike controller-runtime's default it has no overall
// token bucket: one item's lasting conflict must not slow every other item
// down, and a burst of claims is not an error storm.
func RateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](First, Max)
}

// Options are the options of a controller running workers passes at once,
// with RateLimiter and NewQueue.
func Options(workers int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: workers, RateLimiter: RateLimiter(), NewQueue: NewQueue}
}
