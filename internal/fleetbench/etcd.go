package fleetbench

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetetcd"
)

// etcdClient is a client as a pod would make one: every member's
// endpoint, and keepalives of a few seconds so that it leaves a member
// that stopped answering (package fleetetcd's advice).
func etcdClient(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	})
}

// etcdSource makes a watcher's own etcd client, its source and its
// announcer, and returns a function that closes them.
func etcdSource(_ context.Context, cfg WorkerConfig, instance string) (fleet.Source, fleet.Announcer, func(), error) {
	cli, err := etcdClient(cfg.Endpoints)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("etcd client: %w", err)
	}
	st := fleetetcd.Store{Client: cli}
	ann := st.Announcer(cfg.Service, instance)
	return st.Source(cfg.Service), ann, func() {
		_ = ann.Close()
		_ = cli.Close()
	}, nil
}

// etcdStore is where the parent writes the policy: the key a
// fleetetcd.Source watches, written directly, without Push's checks, so
// that invalid documents reach the watchers too.
type etcdStore struct {
	cli     *clientv3.Client
	key     string
	service string
}

func newEtcdStore(endpoints []string, service string) (*etcdStore, error) {
	cli, err := etcdClient(endpoints)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return &etcdStore{cli: cli, key: fleetetcd.Store{Client: cli}.PolicyKey(service), service: service}, nil
}

func (s *etcdStore) push(ctx context.Context, doc []byte) error {
	_, err := s.cli.Put(ctx, s.key, string(doc))
	return err
}

func (s *etcdStore) close() { _ = s.cli.Close() }

// onVersion counts the pods fleetetcd lists on version v.
func (s *etcdStore) onVersion(ctx context.Context, v int64) (int, error) {
	pods, err := fleetetcd.Store{Client: s.cli}.List(ctx, s.service)
	n := 0
	for _, p := range pods {
		if p.Version == v {
			n++
		}
	}
	return n, err
}
