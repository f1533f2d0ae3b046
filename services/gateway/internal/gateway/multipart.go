package gateway

import "net/http"

// multipartClusters will read EMCO's multipart/form-data cluster
// registration (issue 20); until it lands every request passes as it is.
func multipartClusters(next http.Handler) http.Handler { return next }
