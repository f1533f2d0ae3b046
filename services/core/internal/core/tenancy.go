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
}

// NewTenancy reads DCM_RESERVED_NAMESPACES and DCM_MAX_QUOTA.
func NewTenancy(reserved, maxQuota string) (Tenancy, error) {
	m, err := kube.ParseHardText("DCM_MAX_QUOTA", maxQuota)
	if err != nil {
		return Tenancy{}, err
	}
	return Tenancy{Reserved: kube.ParseList(reserved), MaxQuota: m}, nil
}

// grants is what the caller of a create may grant, and the installation's
// limits: the plan checks the whole body against it.
type grants struct {
	Tenancy
	mayGrant bool
}
