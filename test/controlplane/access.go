package controlplane

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Access is one SubjectAccessReview and its expected answer.
type Access struct {
	// Side is whose boundary it is: "core" or "driver".
	Side    string
	User    string
	Attrs   authorizationv1.ResourceAttributes
	Allowed bool
}

// Boundaries are the lines the controllers' roles must keep, for the core's
// and the driver's ServiceAccounts (namespace, name): each may elect its
// leader only in its own namespace and never touch another's Lease (a
// kube-system one above all); the driver creates and deletes Services only
// in its own namespace and elsewhere only patches them; neither reads
// Secrets; each writes only what its side of the contract writes.
func Boundaries(coreNamespace, coreAccount, driverNamespace, driverAccount string) []Access {
	core := "system:serviceaccount:" + coreNamespace + ":" + coreAccount
	driver := "system:serviceaccount:" + driverNamespace + ":" + driverAccount
	const group = "local.sdn.cozystack.io"
	lease := func(ns, name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: name}
	}
	svc := func(ns, verb string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "services"}
	}
	return []Access{
		{"core", core, lease("kube-system", "kube-scheduler"), false},
		{"driver", driver, lease("kube-system", "kube-scheduler"), false},
		{"core", core, lease(coreNamespace, "address-controller.local.sdn.cozystack.io"), true},
		{"driver", driver, lease(driverNamespace, "metallb-iad.local.sdn.cozystack.io"), true},
		{"driver", driver, lease(coreNamespace, "address-controller.local.sdn.cozystack.io"), false},
		{"core", core, lease(driverNamespace, "metallb-iad.local.sdn.cozystack.io"), false},
		{"driver", driver, svc(driverNamespace, "create"), true},
		{"driver", driver, svc(driverNamespace, "delete"), true},
		{"driver", driver, svc("default", "create"), false},
		{"driver", driver, svc("default", "delete"), false},
		{"driver", driver, svc("default", "update"), false},
		{"driver", driver, svc("default", "patch"), true},
		{"driver", driver, svc("", "watch"), true},
		{"core", core, svc("default", "create"), false},
		{"core", core, svc("default", "update"), false},
		{"driver", driver, authorizationv1.ResourceAttributes{Verb: "delete", Group: group, Resource: "ipaddresses"}, false},
		{"driver", driver, authorizationv1.ResourceAttributes{Namespace: "default", Verb: "patch", Group: group, Resource: "ipaddressclaims"}, false},
		{"driver", driver, authorizationv1.ResourceAttributes{Namespace: "default", Verb: "update", Group: group, Resource: "ipaddressclaims", Subresource: "status"}, false},
		{"core", core, authorizationv1.ResourceAttributes{Verb: "create", Group: group, Resource: "ipaddresses"}, false},
		// The core writes its part of a class's status (counts, exhaustion;
		// the webhook keeps it to that part), never a class itself.
		{"core", core, authorizationv1.ResourceAttributes{Verb: "delete", Group: group, Resource: "ipaddressclasses"}, false},
		{"driver", driver, authorizationv1.ResourceAttributes{Namespace: "default", Verb: "get", Resource: "secrets"}, false},
		{"core", core, authorizationv1.ResourceAttributes{Namespace: "default", Verb: "get", Resource: "secrets"}, false},
		{"core", core, authorizationv1.ResourceAttributes{Namespace: coreNamespace, Verb: "get", Resource: "secrets"}, false},
	}
}

// CheckAccess asks the API server each review, as the ServiceAccount's
// groups, and fails t for every answer that is not the expected one.
func CheckAccess(ctx context.Context, t *testing.T, c client.Client, reviews []Access) {
	t.Helper()
	for _, r := range reviews {
		attrs := r.Attrs
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: r.User, Groups: []string{"system:serviceaccounts", "system:authenticated"}, ResourceAttributes: &attrs}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != r.Allowed {
			t.Errorf("%s may %s %s %s in %q: %v, want %v %s", r.User, attrs.Verb, attrs.Resource, attrs.Name, attrs.Namespace,
				sar.Status.Allowed, r.Allowed, sar.Status.Reason)
		}
	}
}
