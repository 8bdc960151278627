package cachetrim

import (
	"encoding/hex"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// A slim object is how the cache keeps a claim or an address: the spec and
// status as they are, the metadata in a fifth of its room. What varies per
// object — name, UID, resource version, generation, creation time — is kept
// inline in its most compact exact form; what objects of a kind share —
// kind, namespace, labels, annotations, finalizers — behind one pointer
// that equal objects share. The decoded object's metadata, its UID and
// resource version strings cost some 300 bytes more per object: 40 MB
// at a /16 of claims and addresses.
//
// Slimming is exact or not done: an object whose metadata does not come
// back identical from its slim form (an owner reference, a deletion
// timestamp, managedFields, long labels...) is kept whole.

// slimMeta is an object's metadata in slim form.
type slimMeta struct {
	name       string
	uid        [16]byte
	rv         uint64
	created    int64 // Unix seconds; metadata times have no finer grain
	generation int64
	common     *commonMeta
}

// commonMeta is the metadata that many objects have equal, shared.
type commonMeta struct {
	typeMeta    metav1.TypeMeta
	namespace   string
	labels      map[string]string
	annotations map[string]string
	finalizers  []string
	// noUID: the objects have no UID (the driver's outlines of another
	// class's objects drop it).
	noUID bool
}

// slimAddress and slimClaim are the slim forms of the two kinds.
type slimAddress struct {
	slimMeta
	spec   v1alpha1.IPAddressSpec
	status v1alpha1.IPAddressStatus
}

type slimClaim struct {
	slimMeta
	spec   v1alpha1.IPAddressClaimSpec
	status v1alpha1.IPAddressClaimStatus
}

// Slim is obj's slim form when it has an exact one, else obj.
func Slim(obj any) any {
	switch o := obj.(type) {
	case *v1alpha1.IPAddress:
		if m, ok := slimMetaOf(o.TypeMeta, &o.ObjectMeta); ok {
			return &slimAddress{slimMeta: m, spec: o.Spec, status: o.Status}
		}
	case *v1alpha1.IPAddressClaim:
		if m, ok := slimMetaOf(o.TypeMeta, &o.ObjectMeta); ok {
			return &slimClaim{slimMeta: m, spec: o.Spec, status: o.Status}
		}
	}
	return obj
}

// Whole is the object obj is the slim form of, made anew; any other obj
// is returned as is. The result shares strings, maps and slices with obj
// and with other objects: like the cache's own objects, it must not be
// changed.
func Whole(obj any) any {
	switch s := obj.(type) {
	case *slimAddress:
		a := &v1alpha1.IPAddress{Spec: s.spec, Status: s.status}
		s.into(&a.TypeMeta, &a.ObjectMeta)
		return a
	case *slimClaim:
		c := &v1alpha1.IPAddressClaim{Spec: s.spec, Status: s.status}
		s.into(&c.TypeMeta, &c.ObjectMeta)
		return c
	}
	return obj
}

// GetObjectMeta lets the informer's key functions and its store read a
// slim object's name, namespace and resource version.
func (s *slimMeta) GetObjectMeta() metav1.Object {
	var t metav1.TypeMeta
	m := &metav1.ObjectMeta{}
	s.into(&t, m)
	return m
}

// slimMetaOf is m's slim form, if it has one that comes back exactly.
func slimMetaOf(t metav1.TypeMeta, m *metav1.ObjectMeta) (slimMeta, bool) {
	uid, ok := parseUID(m.UID)
	if !ok && m.UID != "" {
		return slimMeta{}, false
	}
	rv, err := strconv.ParseUint(m.ResourceVersion, 10, 64)
	if err != nil {
		return slimMeta{}, false
	}
	common, ok := commons.get(t, m)
	if !ok {
		return slimMeta{}, false
	}
	s := slimMeta{name: m.Name, uid: uid, rv: rv, created: m.CreationTimestamp.Unix(), generation: m.Generation, common: common}
	if m.CreationTimestamp.IsZero() {
		s.created = zeroTime
	}
	var backT metav1.TypeMeta
	var back metav1.ObjectMeta
	s.into(&backT, &back)
	if backT != t || !reflect.DeepEqual(&back, m) {
		return slimMeta{}, false
	}
	return s, true
}

// zeroTime marks a zero creation time, which no Unix second stands for.
const zeroTime = -1 << 63

// into writes the metadata s stands for.
func (s *slimMeta) into(t *metav1.TypeMeta, m *metav1.ObjectMeta) {
	c := s.common
	*t = c.typeMeta
	*m = metav1.ObjectMeta{
		Name: s.name, Namespace: c.namespace,
		ResourceVersion: strconv.FormatUint(s.rv, 10), Generation: s.generation,
		Labels: c.labels, Annotations: c.annotations, Finalizers: c.finalizers,
	}
	if !c.noUID {
		m.UID = formatUID(s.uid)
	}
	if s.created != zeroTime {
		m.CreationTimestamp = metav1.NewTime(time.Unix(s.created, 0).Local())
	}
}

// parseUID reads a UID in the API server's form, 36 lowercase hex digits
// and dashes, into its 16 bytes.
func parseUID(uid types.UID) ([16]byte, bool) {
	var out [16]byte
	s := string(uid)
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return out, false
	}
	raw := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if strings.ToLower(raw) != raw {
		return out, false
	}
	if _, err := hex.Decode(out[:], []byte(raw)); err != nil {
		return out, false
	}
	return out, true
}

func formatUID(b [16]byte) types.UID {
	var buf [36]byte
	hex.Encode(buf[0:8], b[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], b[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], b[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], b[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:36], b[10:16])
	return types.UID(buf[:])
}

// commons is the table of shared metadata, bounded like the shared maps:
// it starts afresh once full, and the common values come back into it at
// their next sighting.
var commons = commonTable{table: map[string]*commonMeta{}}

type commonTable struct {
	mu    sync.Mutex
	table map[string]*commonMeta
}

// get is the shared metadata of t and m, when their labels and
// annotations are short enough to share.
func (c *commonTable) get(t metav1.TypeMeta, m *metav1.ObjectMeta) (*commonMeta, bool) {
	labels, ok := mapKey(m.Labels)
	if !ok {
		return nil, false
	}
	annotations, ok := mapKey(m.Annotations)
	if !ok {
		return nil, false
	}
	var b strings.Builder
	for _, s := range []string{t.APIVersion, t.Kind, m.Namespace, labels, annotations} {
		b.WriteString(s)
		b.WriteByte(1)
	}
	b.WriteString(strconv.Itoa(len(m.Finalizers)))
	for _, f := range m.Finalizers {
		b.WriteByte(1)
		b.WriteString(f)
	}
	// nil and empty differ to a deep comparison: say which.
	noUID := m.UID == ""
	b.WriteString(strconv.FormatBool(m.Labels == nil) + strconv.FormatBool(m.Annotations == nil) + strconv.FormatBool(m.Finalizers == nil) + strconv.FormatBool(noUID))
	key := b.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if cm, ok := c.table[key]; ok {
		return cm, true
	}
	if len(c.table) >= maxSharedMaps {
		c.table = map[string]*commonMeta{}
	}
	cm := &commonMeta{typeMeta: t, namespace: m.Namespace, labels: m.Labels, annotations: m.Annotations, finalizers: m.Finalizers, noUID: noUID}
	c.table[key] = cm
	return cm, true
}
