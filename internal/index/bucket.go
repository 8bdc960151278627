package index

import (
	"context"
	"hash/fnv"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// buckets is how many keys a bucketed index has. The cache keeps a set of
// object names per key: an index whose values are nearly unique per
// object (the claim an address names, the address a Service holds) costs
// a one-entry set per object that way, a few hundred bytes each — tens of
// megabytes at a /16. Filed by bucket, a set holds about sixteen objects
// at a /16, which ListBucketed walks uncopied.
const buckets = 4096

// bucketKeys are the bucket keys, made once.
var bucketKeys = func() (keys [buckets]string) {
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	return keys
}()

// Bucket is the key a bucketed index files value under.
func Bucket(value string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(value))
	return bucketKeys[h.Sum32()%buckets]
}

// Bucketed is an index function that files an object under the buckets
// of its values(object); ListBucketed reads it.
func Bucketed(values func(client.Object) []string) client.IndexerFunc {
	return func(o client.Object) []string {
		var keys []string
		for _, v := range values(o) {
			if k := Bucket(v); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		return keys
	}
}

// ListBucketed lists into list the objects whose values include value,
// from the bucketed index field that values feeds. opts may add more
// (client.UnsafeDisableDeepCopy among them: without it, the objects
// listed are copies, as a list's are).
func ListBucketed(ctx context.Context, c client.Reader, list client.ObjectList, field string,
	values func(client.Object) []string, value string, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	uncopied := lo.UnsafeDisableDeepCopy != nil && *lo.UnsafeDisableDeepCopy
	opts = append(opts, client.UnsafeDisableDeepCopy, client.MatchingFields{field: Bucket(value)})
	if err := c.List(ctx, list, opts...); err != nil {
		return err
	}
	var kept []runtime.Object
	if err := meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok && slices.Contains(values(obj), value) {
			if !uncopied {
				o = o.DeepCopyObject()
			}
			kept = append(kept, o)
		}
		return nil
	}); err != nil {
		return err
	}
	return meta.SetList(list, kept)
}
