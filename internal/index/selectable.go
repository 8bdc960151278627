package index

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// Selectable are the IPAddress fields the core asks the API server to
// select on.
var Selectable = []string{SelectableClassName, SelectableClaimNamespace, SelectableClaimName}

// CheckSelectable asks the API server for IPAddresses by each selectable
// field and says which it refuses. An API server
// that drops the CRD's selectableFields (before Kubernetes 1.31, or with
// the CustomResourceFieldSelectors gate off) refuses every such read, and
// without a check at start the core would run and never bind a claim. An
// error that is not the API server's answer (it is unreachable for now)
// is returned as transient, for the caller to log and go on.
func CheckSelectable(ctx context.Context, live client.Reader) (refused, transient error) {
	for _, f := range Selectable {
		var l v1alpha1.IPAddressList
		// No object has the value "-" (it is not a name), and
		// resourceVersion 0 lets the watch cache answer: the question
		// costs nothing at a /16.
		err := live.List(ctx, &l, client.MatchingFields{f: "-"}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
		switch {
		case err == nil:
		case apierrors.IsBadRequest(err):
			return fmt.Errorf("the API server does not select IPAddresses by %s (%w): the IPAddress CRD declares it in "+
				"selectableFields, which Kubernetes serves from 1.31 on, with the CustomResourceFieldSelectors feature gate", f, err), nil
		case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
			return fmt.Errorf("the API server serves no IPAddresses (%w): install the CRDs, which the core chart carries", err), nil
		default:
			return nil, fmt.Errorf("listing IPAddresses by %s: %w", f, err)
		}
	}
	return nil, nil
}
