package webhook

// The handlers are thin: decode, read what a pure function needs from the
// cache, call it, and turn its field errors into an Invalid status that
// names each field. Every rule they enforce is also in the CRDs' CEL or is
// re-checked by a reconciler, so the core stays correct while the webhook
// is down; the webhook only refuses bad input at the door, with a message.

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/quota"
)

// Paths the API server calls; the configurations in config/webhook are
// generated from the markers below.
const (
	PathDefaultClaim    = "/mutate-ipaddressclaim"
	PathDefaultAddress  = "/mutate-ipaddress"
	PathValidateClaim   = "/validate-ipaddressclaim"
	PathValidateAddress = "/validate-ipaddress"
	PathValidateClass   = "/validate-ipaddressclass"
)

// +kubebuilder:webhook:path=/mutate-ipaddressclaim,mutating=true,failurePolicy=fail,sideEffects=None,groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=create,versions=v1alpha1,name=default.ipaddressclaims.local.sdn.cozystack.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/mutate-ipaddress,mutating=true,failurePolicy=fail,sideEffects=None,groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=create,versions=v1alpha1,name=default.ipaddresses.local.sdn.cozystack.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-ipaddressclaim,mutating=false,failurePolicy=fail,sideEffects=None,groups=local.sdn.cozystack.io,resources=ipaddressclaims;ipaddressclaims/status,verbs=update,versions=v1alpha1,name=validate.ipaddressclaims.local.sdn.cozystack.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-ipaddress,mutating=false,failurePolicy=fail,sideEffects=None,groups=local.sdn.cozystack.io,resources=ipaddresses;ipaddresses/status,verbs=create;update;delete,versions=v1alpha1,name=validate.ipaddresses.local.sdn.cozystack.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-ipaddressclass,mutating=false,failurePolicy=fail,sideEffects=None,groups=local.sdn.cozystack.io,resources=ipaddressclasses;ipaddressclasses/status,verbs=create;update,versions=v1alpha1,name=validate.ipaddressclasses.local.sdn.cozystack.io,admissionReviewVersions=v1,timeoutSeconds=5

// Setup registers the handlers on mgr's webhook server.
func Setup(mgr ctrl.Manager, p Principals) {
	h := handlers{reader: mgr.GetClient(), live: mgr.GetAPIReader(), decoder: admission.NewDecoder(mgr.GetScheme()), principals: p}
	srv, limited := mgr.GetWebhookServer(), newLimits()
	for path, handle := range map[string]admission.HandlerFunc{
		PathDefaultClaim:    h.defaultClaim,
		PathDefaultAddress:  h.defaultAddress,
		PathValidateClaim:   h.validateClaim,
		PathValidateAddress: h.validateAddress,
		PathValidateClass:   h.validateClass,
	} {
		srv.Register(path, limited(&admission.Webhook{Handler: handle}))
	}
}

type handlers struct {
	// reader serves the classes the claim defaulter and the class
	// validator look at, from the manager's cache.
	reader client.Reader
	// live reads the API server, for the rare question the cache may
	// answer too late (holding) or only by walking it (a class's
	// addresses); nil in some unit tests.
	live       client.Reader
	decoder    admission.Decoder
	principals Principals
}

func (h handlers) defaultClaim(ctx context.Context, req admission.Request) admission.Response {
	var claim v1alpha1.IPAddressClaim
	if err := h.decoder.Decode(req, &claim); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var classes v1alpha1.IPAddressClassList
	if err := h.reader.List(ctx, &classes); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if errs := ValidateClaimAddressName(&claim.Spec, field.NewPath("spec")); len(errs) > 0 {
		return respond(req, errs)
	}
	warnings := DropForeignStamp(&claim, req.UserInfo, h.principals)
	dropped := len(warnings) > 0
	warnings = append(warnings, DefaultClaim(&claim, classes.Items)...)
	if !dropped {
		// A claim that came with a stamp not the core's is stamped by
		// the core's reconciler, as the warning says; any other now.
		ProtectClaim(&claim, classes.Items)
	}
	// A claim naming its address is how an administrator adopts one (the
	// claim first, then the address pre-bound to it, which needs no room):
	// only the binder's charge judges it.
	switch denial, err := h.admitQuota(ctx, &claim); {
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	case denial != "":
		return admission.Denied(denial)
	}
	Untrack(&claim.ObjectMeta)
	raw, err := json.Marshal(&claim)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw).WithWarnings(warnings...)
}

func (h handlers) defaultAddress(_ context.Context, req admission.Request) admission.Response {
	var a v1alpha1.IPAddress
	if err := h.decoder.Decode(req, &a); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	return admission.Patched("", append(ProtectAddress(&a), UntrackPatch(&a.ObjectMeta)...)...)
}

func (h handlers) validateClaim(ctx context.Context, req admission.Request) admission.Response {
	var old, claim v1alpha1.IPAddressClaim
	if err := h.decodeBoth(req, &old, &claim); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.SubResource == "status" {
		return respond(req, ValidateClaimStatusUpdate(&old, &claim, req.UserInfo, h.principals, field.NewPath("status")))
	}
	holding := false
	if Retargets(&old, &claim) && !claimHeld(&old) {
		var err error
		if holding, err = h.holding(ctx, &old); err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
	}
	errs := ValidateClaimUpdate(&old, &claim, holding, field.NewPath("spec"))
	if Retargets(&old, &claim) {
		errs = append(errs, ValidateClaimAddressName(&claim.Spec, field.NewPath("spec"))...)
	}
	return respond(req, append(errs, ValidateClaimStampUpdate(&old, &claim, req.UserInfo, h.principals, nil)...))
}

// holding reports whether an address carries claim's UID in its claimRef:
// from the cache, else from the API server (a driver's address just
// created may not be cached yet; the question is asked only when a claim
// that reports no address is re-targeted).
func (h handlers) holding(ctx context.Context, claim *v1alpha1.IPAddressClaim) (bool, error) {
	carries := func(a v1alpha1.IPAddress) bool { return a.Spec.ClaimRef != nil && a.Spec.ClaimRef.UID == claim.UID }
	var addrs v1alpha1.IPAddressList
	if err := index.AddressesNaming(ctx, h.reader, &addrs, claim.Namespace, claim.Name, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	if slices.ContainsFunc(addrs.Items, carries) {
		return true, nil
	}
	if h.live == nil {
		return false, nil
	}
	if err := h.live.List(ctx, &addrs, client.MatchingFields{index.SelectableClaimNamespace: claim.Namespace, index.SelectableClaimName: claim.Name}); err != nil {
		return false, err
	}
	return slices.ContainsFunc(addrs.Items, carries), nil
}

// claimOf is the claim ref names, nil when there is none (or no ref): from
// the cache, else from the API server, for a claim created a moment ago —
// or re-created, the cache showing another UID than ref's.
func (h handlers) claimOf(ctx context.Context, ref *v1alpha1.ClaimReference) (*v1alpha1.IPAddressClaim, error) {
	if ref == nil {
		return nil, nil
	}
	var claim v1alpha1.IPAddressClaim
	key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
	err := h.reader.Get(ctx, key, &claim)
	stale := err == nil && ref.UID != "" && claim.UID != ref.UID // re-created since the cache saw it?
	if (apierrors.IsNotFound(err) || stale) && h.live != nil {
		err = h.live.Get(ctx, key, &claim)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &claim, nil
}

func (h handlers) validateAddress(ctx context.Context, req admission.Request) admission.Response {
	var a v1alpha1.IPAddress
	if req.Operation == admissionv1.Delete {
		var options metav1.DeleteOptions
		if len(req.Options.Raw) > 0 {
			if err := json.Unmarshal(req.Options.Raw, &options); err != nil {
				return admission.Errored(http.StatusBadRequest, err)
			}
		}
		if options.PropagationPolicy == nil || *options.PropagationPolicy != metav1.DeletePropagationForeground {
			return admission.Allowed("")
		}
		if err := h.decoder.DecodeRaw(req.OldObject, &a); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		claim, err := h.claimOf(ctx, a.Spec.ClaimRef)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		return respond(req, ValidateAddressDelete(&options, Holder(a.Spec.ClaimRef, claim), nil))
	}
	if req.Operation == admissionv1.Create {
		if err := h.decoder.Decode(req, &a); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		scope, err := h.scope(ctx, &a, req.UserInfo)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		claim, err := h.claimOf(ctx, a.Spec.ClaimRef)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		errs := append(ValidateAddressCreate(&a, nil), ValidateFlagAnnotations(nil, a.Annotations, AddressFlags, nil)...)
		errs = append(errs, ValidatePreBinding(a.Spec.ClaimRef, claim, field.NewPath("spec"))...)
		return respond(req, append(errs, scope...))
	}
	var old v1alpha1.IPAddress
	if err := h.decodeBoth(req, &old, &a); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	errs, err := h.scope(ctx, &old, req.UserInfo)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if req.SubResource == "status" {
		return respond(req, append(errs, ValidateAddressStatusUpdate(&old, &a, req.UserInfo, h.principals, field.NewPath("status"))...))
	}
	errs = append(errs, ValidateDriverFinalizers(old.Finalizers, a.Finalizers, req.UserInfo, h.principals, nil)...)
	errs = append(errs, ValidateFlagAnnotations(old.Annotations, a.Annotations, AddressFlags, nil)...)
	var holder *v1alpha1.IPAddressClaim
	if ref := old.Spec.ClaimRef; ref != nil && ref.UID != "" && a.Spec.ClaimRef == nil {
		// A binding cleared: by an admin only when no live claim holds it.
		claim, err := h.claimOf(ctx, ref)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		holder = Holder(ref, claim)
	}
	return respond(req, append(errs, ValidateAddressUpdate(&old, &a, holder, req.UserInfo, h.principals, field.NewPath("spec"))...))
}

// admitQuota refuses a claim that the address quotas of its namespace
// already have no room for (quota.Admit), from the cache.
func (h handlers) admitQuota(ctx context.Context, claim *v1alpha1.IPAddressClaim) (string, error) {
	if claim.Spec.AddressName != "" {
		return "", nil
	}
	if claim.Spec.ClassName == "" {
		return "", nil
	}
	var quotas corev1.ResourceQuotaList
	if err := h.reader.List(ctx, &quotas, client.InNamespace(claim.Namespace)); err != nil {
		return "", err
	}
	quotas.Items = slices.DeleteFunc(quotas.Items, func(rq corev1.ResourceQuota) bool { return len(quota.Keys(&rq, claim.Spec.ClassName)) == 0 })
	if len(quotas.Items) == 0 {
		return "", nil
	}
	var addrs v1alpha1.IPAddressList
	if err := h.reader.List(ctx, &addrs, client.UnsafeDisableDeepCopy, client.MatchingFields{index.AddressNamespace: claim.Namespace}); err != nil {
		return "", err
	}
	var class v1alpha1.IPAddressClass
	if err := h.reader.Get(ctx, client.ObjectKey{Name: claim.Spec.ClassName}, &class); client.IgnoreNotFound(err) != nil {
		return "", err
	}
	return quota.Admit(quotas.Items, claim.Name, claim.Spec.ClassName, claim.Spec.Family.Families(), class.Spec.KeepReleasedInNamespace, addrs.Items), nil
}

// scope judges a driver's write to address a against the classes it
// serves; the class is read from the cache, and may be gone.
func (h handlers) scope(ctx context.Context, a *v1alpha1.IPAddress, u authenticationv1.UserInfo) (field.ErrorList, error) {
	if !h.principals.IsDriver(u) {
		return nil, nil
	}
	var class v1alpha1.IPAddressClass
	err := h.reader.Get(ctx, client.ObjectKey{Name: a.Spec.ClassName}, &class)
	if client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	return ValidateDriverScope(a, DriverOf(a, class.Spec.Provisioner), u, h.principals, nil), nil
}

func (h handlers) validateClass(ctx context.Context, req admission.Request) admission.Response {
	var class v1alpha1.IPAddressClass
	if err := h.decoder.Decode(req, &class); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var classes v1alpha1.IPAddressClassList
	if err := h.reader.List(ctx, &classes); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if req.Operation == admissionv1.Create {
		// From the API server, by the selectable field: a class create is
		// rare, and the cache keeps no index of addresses by class.
		var addrs v1alpha1.IPAddressList
		if h.live != nil {
			if err := h.live.List(ctx, &addrs, client.MatchingFields{index.SelectableClassName: class.Name}, client.Limit(20)); err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
		}
		resp := respond(req, append(ValidateClassCreate(&class, classes.Items, nil), ValidateClassProvisioner(&class, addrs.Items, h.principals.Provisioners(), nil)...))
		if w := UnservedProvisioner(&class, h.principals); resp.Allowed && w != "" {
			resp = resp.WithWarnings(w)
		}
		return resp
	}
	var old v1alpha1.IPAddressClass
	if err := h.decoder.DecodeRaw(req.OldObject, &old); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.SubResource == "status" {
		return respond(req, ValidateClassStatusUpdate(&old, &class, req.UserInfo, h.principals, field.NewPath("status")))
	}
	return respond(req, ValidateClassUpdate(&old, &class, classes.Items, nil))
}

func (h handlers) decodeBoth(req admission.Request, old, obj runtime.Object) error {
	if err := h.decoder.DecodeRaw(req.OldObject, old); err != nil {
		return err
	}
	return h.decoder.Decode(req, obj)
}

// respond admits an empty list, and refuses otherwise with an Invalid
// status whose causes name each field — what kubectl prints for a CRD's
// own validation too.
func respond(req admission.Request, errs field.ErrorList) admission.Response {
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	gk := v1alpha1.GroupVersion.WithKind(req.Kind.Kind).GroupKind()
	st := apierrors.NewInvalid(gk, req.Name, errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}
}
