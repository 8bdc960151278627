package claim

import (
	"context"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/index"
)

// queue places the claim in line, per family it has not been reported an
// address of, among the claims of its class waiting for that family: freed
// addresses go to the oldest waiting claim first. A claim held back by its
// namespace's quota waits in no line (it could not take an address).
func (r *Reconciler) queue(ctx context.Context, claim *v1alpha1.IPAddressClaim, class *v1alpha1.IPAddressClass) (map[v1alpha1.IPFamily]place, error) {
	if class == nil || claim.Spec.AddressName != "" || claim.DeletionTimestamp != nil {
		return nil, nil
	}
	line := map[v1alpha1.IPFamily]place{}
	for _, f := range binding.UnreportedFamilies(claim) {
		if r.waitingBook != nil && r.freeBook != nil {
			pl, err := r.placeInBook(ctx, claim, class.Name, f)
			if err != nil {
				return nil, err
			}
			line[f] = pl
			continue
		}
		var waiting v1alpha1.IPAddressClaimList
		if err := r.Client.List(ctx, &waiting, client.UnsafeDisableDeepCopy,
			client.MatchingFields{index.ClaimWaiting: index.WaitingKey(class.Name, f)}); err != nil {
			return nil, err
		}
		pl := place{available: -1}
		for i := range waiting.Items {
			if c := &waiting.Items[i]; c.UID != claim.UID && older(c, claim) && !index.HeldByQuota(c) {
				pl.ahead++
			}
		}
		if pl.ahead > 0 {
			var free v1alpha1.IPAddressList
			if err := r.Client.List(ctx, &free, client.UnsafeDisableDeepCopy, client.Limit(int64(pl.ahead+1)),
				client.MatchingFields{index.AddressPool: index.PoolKey(class.Name, f, v1alpha1.AddressAvailable)}); err != nil {
				return nil, err
			}
			pl.available = min(len(free.Items), pl.ahead+1)
		}
		line[f] = pl
	}
	return line, nil
}

// placeInBook is the claim's place in line from the books: the claims
// filed before it, walked uncopied, and the pool's free count — no list
// of a line that a burst of claims makes long. Each book is fed by a
// handler of its own and may lag the cache by an event: when the books
// say the claim waits, the cache has the last word — nothing else would
// wake a claim told it is second behind a claim already bound.
func (r *Reconciler) placeInBook(ctx context.Context, claim *v1alpha1.IPAddressClaim, class string, f v1alpha1.IPFamily) (place, error) {
	pl := place{available: -1}
	key, mine := index.WaitingKey(class, f), index.LineEntry(claim)
	if pl.ahead = r.waitingBook.Before(key, mine); pl.ahead == 0 {
		return pl, nil
	}
	free := index.PoolKey(class, f, v1alpha1.AddressAvailable)
	pl.available = min(r.freeBook.Len(free), pl.ahead+1)
	if pl.available == 0 {
		var addrs v1alpha1.IPAddressList
		if err := r.Client.List(ctx, &addrs, client.UnsafeDisableDeepCopy, client.Limit(int64(pl.ahead+1)),
			client.MatchingFields{index.AddressPool: free}); err != nil {
			return pl, err
		}
		pl.available = min(len(addrs.Items), pl.ahead+1)
	}
	switch {
	case pl.served():
		return pl, nil
	case pl.available == 0 && pl.ahead > exactPlaces:
		// Nothing to bind, far back: the book's count stands, given by its
		// order of magnitude (a lag of an event moves it by one), and
		// decides against the driver's room whether the class is out of
		// addresses for this claim — cut to the first places, a claim
		// hundreds back behind a pool of fifty would be told it only
		// waits for the driver.
		return pl, nil
	case pl.available == 0:
		// Nothing to bind, but a place near the front is given exactly:
		// the cache confirms those the book files ahead (a book lagging a
		// claim gone ahead would tell the 10th "behind 10 or more").
		ahead, err := r.stillWaiting(ctx, key, mine, exactPlaces)
		pl.ahead = ahead
		return pl, err
	}
	ahead, err := r.stillWaiting(ctx, key, mine, pl.available)
	pl.ahead = ahead
	return pl, err
}

// stillWaiting counts the claims the line files under key before entry
// that the cache shows still waiting there, up to limit: past the
// addresses left, the claim waits whatever the exact count.
func (r *Reconciler) stillWaiting(ctx context.Context, key, entry string, limit int) (int, error) {
	n := 0
	var err error
	r.waitingBook.Walk(key, func(e string) bool {
		if e >= entry || n >= limit {
			return false
		}
		ns, name, _ := strings.Cut(index.LineClaim(e), "/")
		var c v1alpha1.IPAddressClaim
		switch err = r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &c); {
		case apierrors.IsNotFound(err):
			err = nil
		case err == nil && slices.Contains(index.WaitingKeys(&c), key) && !index.HeldByQuota(&c):
			n++
		}
		return err == nil
	})
	return n, err
}

// older reports whether claim a came before b: created earlier, or at the
// same second with the smaller namespace/name.
func older(a, b *v1alpha1.IPAddressClaim) bool {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c < 0
	}
	return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) < 0
}
