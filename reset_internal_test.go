package hedge

import (
	"context"
	"reflect"
	"testing"
	"unsafe"
)

// TestCallReset checks that reset leaves a used call as begin expects
// it: every field of callState zero but h, st and plan (which begin sets
// afresh) and the unlocked mutex, its timer zero but for the call itself
// (set once for the call's life), and the first copy's state zero. A
// field added to callState or copyState that reset does not clear fails
// here.
func TestCallReset(t *testing.T) {
	c := new(call[*int])
	keep := map[string]bool{"h": true, "st": true, "plan": true, "mu": true, "timer": true}
	c.timer = timerItem{at: 7, t: c, slot: 7, armed: true}
	cs := reflect.ValueOf(&c.callState).Elem()
	for i := range cs.NumField() {
		if name := cs.Type().Field(i).Name; !keep[name] {
			fill(t, name, settable(cs.Field(i)))
		}
	}
	cp := reflect.ValueOf(&c.copies[0]).Elem()
	for i := range cp.NumField() {
		fill(t, cp.Type().Field(i).Name, settable(cp.Field(i)))
	}
	c.reset()
	for i := range cs.NumField() {
		if name := cs.Type().Field(i).Name; !keep[name] && !cs.Field(i).IsZero() {
			t.Errorf("callState.%s is %v after reset; want it zero (clear it in reset)", name, settable(cs.Field(i)))
		}
	}
	if c.timer != (timerItem{t: c}) {
		t.Errorf("timer is %+v after reset; want it zero but for t, the call itself", c.timer)
	}
	for i := range cp.NumField() {
		if !cp.Field(i).IsZero() {
			t.Errorf("copies[0].%s is %v after reset; want it zero (clear it in reset)", cp.Type().Field(i).Name, settable(cp.Field(i)))
		}
	}
}

// settable returns v, a field of an addressable struct, as a value that
// may be set and read although it is unexported.
func settable(v reflect.Value) reflect.Value {
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// fill sets v to a value that is not its type's zero.
func fill(t *testing.T, name string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.String:
		v.SetString("key")
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Chan:
		v.Set(reflect.MakeChan(v.Type(), 0))
	case reflect.Func:
		v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value { panic("unused") }))
	case reflect.Interface:
		v.Set(reflect.ValueOf(context.Background()))
	default:
		t.Fatalf("field %s of kind %v: teach fill to set it", name, v.Kind())
	}
	if v.IsZero() {
		t.Fatalf("field %s: fill left it zero", name)
	}
}
