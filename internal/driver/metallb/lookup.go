package metallb

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// Books reads the classes and pools the driver serves from a cache.
type Books struct {
	Reader client.Reader
	// Cache, when set, is walked uncopied where every object of a kind is
	// read (Used); Reader is listed otherwise.
	Cache client.Reader
	// Namespace is where MetalLB's IPAddressPools live.
	Namespace string
	// Placeholders is the driver's namespace, where its placeholders live.
	Placeholders string
}

// Class resolves the class named name. A class that does not exist is
// returned refused, with no pool; obj is nil then.
func (b Books) Class(ctx context.Context, name string) (c Class, obj *v1alpha1.IPAddressClass, err error) {
	obj = &v1alpha1.IPAddressClass{}
	if err := b.Reader.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return Class{Name: name, Refusal: "IPAddressClass " + name + " not found"}, nil, nil
		}
		return Class{}, nil, err
	}
	var classes v1alpha1.IPAddressClassList
	if err := b.Reader.List(ctx, &classes); err != nil {
		return Class{}, nil, err
	}
	var pool *unstructured.Unstructured
	if params, perr := ParseParameters(obj); perr == nil {
		if pool, err = b.Pool(ctx, params.Pool); err != nil {
			return Class{}, nil, err
		}
	}
	return Resolve(obj, classes.Items, pool, b.Namespace, b.Placeholders), obj, nil
}

// Pool reads the IPAddressPool named name; nil when it does not exist.
func (b Books) Pool(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	u := NewPool()
	if err := b.Reader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return u, nil
}

// ClassesNamingPool lists the classes of this provisioner whose parameters
// name pool: the classes a pool event concerns.
func (b Books) ClassesNamingPool(ctx context.Context, pool string) ([]string, error) {
	var classes v1alpha1.IPAddressClassList
	if err := b.Reader.List(ctx, &classes); err != nil {
		return nil, err
	}
	var names []string
	for i := range classes.Items {
		c := &classes.Items[i]
		if p, err := ParseParameters(c); err == nil && c.Spec.Provisioner == Provisioner && p.Pool == pool {
			names = append(names, c.Name)
		}
	}
	return names, nil
}
