package core

import (
	"github.com/dcm-project/dcm/platform/kube"
)

// Tenancy is what an installation sets for tenant isolation: namespaces no
// logical cloud may take besides the built-in ones, and the largest quota
// a non-admin may set.
type Tenancy struct {
	Reserved []string
	MaxQuota []kube.Amount
	// PodSecurity is the level a logical cloud gets when its body sets
	// none; it is stored with the logical cloud.
	PodSecurity string
}

// NewTenancy reads DCM_RESERVED_NAMESPACES, DCM_MAX_QUOTA and
// DCM_POD_SECURITY.
func NewTenancy(reserved, maxQuota, podSecurity string) (Tenancy, error) {
	m, err := kube.ParseHardText("DCM_MAX_QUOTA", maxQuota)
	if err != nil {
		return Tenancy{}, err
	}
	podSecurity, err = kube.DefaultPodSecurity(podSecurity)
	if err != nil {
		return Tenancy{}, err
	}
	return Tenancy{Reserved: kube.ParseList(reserved), MaxQuota: m, PodSecurity: podSecurity}, nil
}

// grants is what the caller of a create may grant, and the installation's
// limits: the plan checks the whole body against it.
type grants struct {
	Tenancy
	mayGrant bool
}
