package lock

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Patch applies change to obj and writes the difference, locked on obj's
// resource version. obj holds the stored object afterwards.
func Patch(ctx context.Context, c client.Writer, obj client.Object, change func()) error {
	base := obj.DeepCopyObject().(client.Object)
	change()
	return Diff(ctx, c, base, obj)
}

// Diff writes to as its difference from from, locked on from's resource
// version: a write decided on what a pass read lands on exactly that.
func Diff(ctx context.Context, c client.Writer, from, to client.Object) error {
	return c.Patch(ctx, to, client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{}))
}

// SetFinalizer adds (present) or removes the finalizer on obj, locked on
// obj's resource version. An object already gone needs nothing.
func SetFinalizer(ctx context.Context, c client.Writer, obj client.Object, finalizer string, present bool) error {
	return client.IgnoreNotFound(Patch(ctx, c, obj, func() {
		if present {
			controllerutil.AddFinalizer(obj, finalizer)
		} else {
			controllerutil.RemoveFinalizer(obj, finalizer)
		}
	}))
}
