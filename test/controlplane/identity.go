package controlplane

import (
	"context"
	"fmt"
	"os"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// ServiceAccount creates the ServiceAccount namespace/name (and its
// namespace), binds it to the ClusterRole and the Roles in roleFile
// (generated from a binary's RBAC markers; the Roles in the
// ServiceAccount's namespace) and to nothing else, and returns a kubeconfig
// with a token of it valid for validity: a controller run with it acts
// exactly as it would in a cluster.
func (c *ControlPlane) ServiceAccount(ctx context.Context, namespace, name, roleFile string, validity int64) ([]byte, error) {
	clusterRoles, roles, err := ReadRoles(roleFile)
	if err != nil {
		return nil, err
	}
	cs := c.clientset
	create := func(err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	if err := create2(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})); create(err) != nil {
		return nil, err
	}
	if err := create2(cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})); create(err) != nil {
		return nil, err
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}}
	for _, role := range clusterRoles {
		if err := create2(cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})); create(err) != nil {
			return nil, err
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   subjects,
		}
		if err := create2(cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})); create(err) != nil {
			return nil, err
		}
	}
	for _, role := range roles {
		// A generated Role names a placeholder namespace; it is granted in
		// the ServiceAccount's own, as a chart grants it in the release's.
		role.Namespace = namespace
		if err := create2(cs.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{})); create(err) != nil {
			return nil, err
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   subjects,
		}
		if err := create2(cs.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{})); create(err) != nil {
			return nil, err
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(validity)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	user := "system:serviceaccount:" + namespace + ":" + name
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	cfg.CurrentContext = user
	return clientcmd.Write(*cfg)
}

func create2[T any](_ T, err error) error { return err }

// ReadRoles reads a file of RBAC roles, as controller-gen writes them: a
// ClusterRole and, for rules scoped to a namespace, Roles.
func ReadRoles(path string) ([]*rbacv1.ClusterRole, []*rbacv1.Role, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var clusterRoles []*rbacv1.ClusterRole
	var roles []*rbacv1.Role
	for _, doc := range strings.Split(string(raw), "\n---") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		switch meta.Kind {
		case "":
			continue
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", path, err)
			}
			clusterRoles = append(clusterRoles, &r)
		case "Role":
			var r rbacv1.Role
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", path, err)
			}
			roles = append(roles, &r)
		default:
			return nil, nil, fmt.Errorf("%s: unexpected %s", path, meta.Kind)
		}
	}
	return clusterRoles, roles, nil
}
