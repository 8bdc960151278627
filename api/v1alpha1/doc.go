// Package v1alpha1 holds the local.sdn.cozystack.io/v1alpha1 API: IPAddressClass,
// IPAddress and IPAddressClaim, the names of their annotations, finalizers,
// conditions and reasons, and IPAddressName, the one function that derives an
// IPAddress object's name from its IP.
//
// +kubebuilder:object:generate=true
// +groupName=local.sdn.cozystack.io
package v1alpha1
