// Package rowscan lets each copy of a hedged row read scan into values
// of its own, and copies the winner's into the caller's destinations on
// the caller's goroutine: what hedgepgx's and hedgesql's Row.Scan share.
// Which destinations a package accepts is its own to check.
package rowscan

import "reflect"

// ElemType returns the type d points to, nil for a nil d (a column to
// skip), and false when d is neither nil nor a non-nil pointer.
func ElemType(d any) (reflect.Type, bool) {
	if d == nil {
		return nil, true
	}
	v := reflect.ValueOf(d)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil, false
	}
	return v.Type().Elem(), true
}

// Types are the element types of a Scan's destinations, nil for a
// column to skip.
type Types []reflect.Type

// New returns, for one copy, a fresh pointer to a zero value of each
// type, and the same pointers as the arguments of a Scan; a nil type
// gives an invalid Value and a nil argument.
func (ts Types) New() (ptrs []reflect.Value, args []any) {
	ptrs = make([]reflect.Value, len(ts))
	args = make([]any, len(ts))
	for i, t := range ts {
		if t != nil {
			ptrs[i] = reflect.New(t)
			args[i] = ptrs[i].Interface()
		}
	}
	return ptrs, args
}

// Set stores the value each of ptrs (from New) points to where dest's
// pointer of the same index points, skipping invalid ones.
func Set(dest []any, ptrs []reflect.Value) {
	for i, p := range ptrs {
		if p.IsValid() {
			reflect.ValueOf(dest[i]).Elem().Set(p.Elem())
		}
	}
}
