//go:build !linux

package pgtest

import "errors"

// Stall is a cluster frozen by Cluster.Stall (Linux only).
type Stall struct{}

// Stall freezes the server's postmaster and client backends; it needs
// Linux's /proc to find the backends and fails elsewhere.
func (c *Cluster) Stall() (*Stall, error) {
	return nil, errors.New("pgtest: Stall needs Linux")
}

// Release does nothing outside Linux.
func (s *Stall) Release() error { return nil }

func (c *Cluster) releaseStall() {}

// ClientBackends needs Linux's /proc and fails elsewhere.
func (c *Cluster) ClientBackends() ([]int, error) {
	return nil, errors.New("pgtest: ClientBackends needs Linux")
}
