package servertest

import "io"

// EndlessBody is a request body that gives First and then never ends
// until Stop is closed (then io.EOF): a client still sending when the
// server answers, as tests of reading no body before authentication need.
type EndlessBody struct {
	First []byte
	Stop  <-chan struct{}
}

// Read implements io.Reader.
func (b *EndlessBody) Read(p []byte) (int, error) {
	if len(b.First) > 0 {
		n := copy(p, b.First)
		b.First = b.First[n:]
		return n, nil
	}
	<-b.Stop
	return 0, io.EOF
}
