package retry

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestEnd(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "web", errors.New("denied"))
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "web", errors.New("changed"))
	for _, tc := range []struct {
		name  string
		err   error
		again bool // requeued with backoff, nothing logged
	}{
		{"no error", nil, false},
		{"a conflict is a lost race", conflict, true},
		{"a told refusal is not logged again", Told(forbidden), true},
		{"a told refusal wrapped further", fmt.Errorf("pinning: %w", Told(forbidden)), true},
		{"an untold refusal is an error", forbidden, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := End(tc.err)
			if again := res.Requeue && err == nil; again != tc.again { //nolint:staticcheck // Again's Requeue
				t.Fatalf("End(%v) = %+v, %v; want again=%v", tc.err, res, err, tc.again)
			}
			if !tc.again && !errors.Is(err, tc.err) {
				t.Fatalf("End(%v) returned %v", tc.err, err)
			}
		})
	}
	if Told(nil) != nil {
		t.Fatal("Told(nil) is not nil")
	}
	if !apierrors.IsForbidden(Told(forbidden)) {
		t.Fatal("a told error no longer reads as what it wraps")
	}
}

func TestRefusal(t *testing.T) {
	svc := schema.GroupResource{Resource: "services"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a webhook's denial", apierrors.NewForbidden(svc, "web", errors.New(`admission webhook "validate.example.com" denied the request: no`)), true},
		{"a quota", apierrors.NewForbidden(svc, "web", errors.New(`exceeded quota: services, requested: count/services=1`)), true},
		{"a namespace being deleted", apierrors.NewForbidden(svc, "web", errors.New(`unable to create new content in namespace shop because it is being terminated`)), true},
		{"validation", apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "web", nil), true},
		{"RBAC: the operator's to fix", apierrors.NewForbidden(svc, "", errors.New(`User "system:serviceaccount:metallb-iad-system:metallb-iad" cannot create resource "services" in API group "" in the namespace "shop"`)), false},
		{"a conflict", apierrors.NewConflict(svc, "web", errors.New("changed")), false},
	} {
		if got := Refusal(tc.err); got != tc.want {
			t.Errorf("%s: Refusal(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
