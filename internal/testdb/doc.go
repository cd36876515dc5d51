// Package testdb starts real PostgreSQL and Redis servers for tests, from
// the Debian packages (postgresql, redis-server), on free loopback ports
// with throwaway data directories. A package's tests start one of each in
// TestMain and stop it afterwards.
//
// A missing server binary is a test failure with the command to install it,
// never a skip: the README's test command (scripts/test.sh) installs them.
package testdb
