module github.com/tailcut/hedge/bench/peers

go 1.26.0

replace github.com/tailcut/hedge => ../..

require (
	github.com/cristalhq/hedgedhttp v0.9.2
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/tailcut/hedge v0.0.0-00010101000000-000000000000
)

require github.com/bits-and-blooms/bitset v1.24.4 // indirect
