//go:build !unix

package etcdtest

import "os"

// Outside Unix a member is killed to stop it and cannot be paused.
var stopSignal, pauseSignal, contSignal os.Signal = os.Kill, os.Kill, os.Kill
