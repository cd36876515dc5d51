//go:build !unix

package raftstore

// dirLock is a no-op where flock is not available: the data dir is not
// protected against a second process.
type dirLock struct{}

// lockDataDir does nothing on this platform.
func lockDataDir(dir string) (*dirLock, error) { return &dirLock{}, nil }

// release does nothing on this platform.
func (l *dirLock) release() error { return nil }
