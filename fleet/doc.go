// Package fleet steers the Hedgers of every pod of a service from one
// policy document, kept in a store the team already runs: a file or a
// Kubernetes ConfigMap (this package), etcd (package fleetetcd) or an
// OpenFeature flag (package fleetfeature). It is not a control plane:
// the store is the source of truth, and each pod follows it on its own.
//
// # The document
//
// One document per service, versioned, in JSON or YAML:
//
//	service: checkout
//	version: 7
//	hedgers:
//	  "*":
//	    mode: on
//	    rollout: 0.1
//	    percentile: 95
//	    budget: {ratio: 0.1, burst: 10}
//	    maxAttempts: 2
//	    maxHedgesPerSecond: 200
//	    ops:
//	      get: {mode: shadow}
//	kill:
//	  until: 2026-12-07T16:30:00Z
//	  reason: incident
//
// [Parse] reads it and refuses it whole on any mistake, with the messages
// of [hedge.New] for the settings a [hedge.Config] has too. A field left
// out takes the value of the rules around it, and at the top that of the
// Hedger's Config. docs/fleet.md describes each field.
//
// # Applying it
//
// A [Watcher] applies each new document to the pod's running Hedgers
// with [hedge.Hedger.SetLive]: what they learned (latency windows, the
// payoff rule's evidence, budget tokens) stays. The rollout is a share
// of pods, not of requests: a pod is in by a hash of its instance name
// ([InRollout]), so that the same pods stay in as the share grows, and
// the others run in shadow. Each pod waits a random [Options.Jitter]
// before applying a change, so that a bad push does not reach the whole
// fleet at once. A change that turns a Hedger off (a kill switch, the
// fallback) also stops the hedges of requests already waiting for one.
//
// The [File] source watches a file or a ConfigMap volume by a stat every
// [DefaultPoll], which sees kubelet's atomic swap of the volume's links.
//
// # Failing static
//
// A document that is invalid, too large, for another service, or not
// newer than the one in force is refused: the last good one stays, and
// [Stats.Refused] and an [Event] say why ([Reason]). A store that cannot
// be reached keeps the last good document too. At start, the pod runs
// the Config in its code and says so. After [Options.LostAfter] without
// the store, it falls back to [Options.Fallback]: off, or the Config in
// code. Nothing hedges more than the last good document allowed while a
// change is in doubt.
//
// # Reporting back
//
// [Watcher.Status] says which version a pod runs ([PodStatus]); an
// [Announcer] publishes it (fleetetcd keeps one key per pod), hedgectl
// serves it, and hedgeprom and hedgeotel export it as metrics.
package fleet
