// Command etcdserver is the etcd server that the tests, the benchmark and
// the README's walkthrough run: etcd's own main, of the same release as
// the client in the main module's go.mod (go.etcd.io/etcd/client/v3).
//
// It is a module of its own so that the server's dependencies stay out of
// the main module. scripts/etcd-server builds it once into a cache
// directory; internal/etcdtest starts it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
