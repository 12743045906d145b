package pgv

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// numberCheck is a numeric field's compiled rules (templates/goshared
// num.go, const.go, ltgt.go, in.go).
type numberCheck interface {
	// check returns the reasons v fails, nil if none. (An interface
	// method taking the report would make every report escape.)
	check(v protoreflect.Value) []string
}

type number interface {
	~int32 | ~int64 | ~uint32 | ~uint64 | ~float32 | ~float64
}

type numberRules[T number] struct {
	c, lt, lte, gt, gte *T
	in, notIn           []T
	ignoreEmpty         bool
	of                  func(protoreflect.Value) T
}

func newNumber[T number](c, lt, lte, gt, gte *T, in, notIn []T, ignoreEmpty bool, of func(protoreflect.Value) T) (numberCheck, error) {
	return &numberRules[T]{c: c, lt: lt, lte: lte, gt: gt, gte: gte, in: in, notIn: notIn, ignoreEmpty: ignoreEmpty, of: of}, nil
}

func (r *numberRules[T]) check(pv protoreflect.Value) (fails []string) {
	v := r.of(pv)
	if r.ignoreEmpty && v == 0 {
		return nil
	}
	if r.c != nil && v != *r.c {
		fails = append(fails, fmt.Sprint("value must equal ", *r.c))
	}
	switch {
	case r.lt != nil && r.gt != nil:
		if *r.lt > *r.gt {
			if v <= *r.gt || v >= *r.lt {
				fails = append(fails, fmt.Sprint("value must be inside range (", *r.gt, ", ", *r.lt, ")"))
			}
		} else if v >= *r.lt && v <= *r.gt {
			fails = append(fails, fmt.Sprint("value must be outside range [", *r.lt, ", ", *r.gt, "]"))
		}
	case r.lt != nil && r.gte != nil:
		if *r.lt > *r.gte {
			if v < *r.gte || v >= *r.lt {
				fails = append(fails, fmt.Sprint("value must be inside range [", *r.gte, ", ", *r.lt, ")"))
			}
		} else if v >= *r.lt && v < *r.gte {
			fails = append(fails, fmt.Sprint("value must be outside range [", *r.lt, ", ", *r.gte, ")"))
		}
	case r.lt != nil:
		if v >= *r.lt {
			fails = append(fails, fmt.Sprint("value must be less than ", *r.lt))
		}
	case r.lte != nil && r.gt != nil:
		if *r.lte > *r.gt {
			if v <= *r.gt || v > *r.lte {
				fails = append(fails, fmt.Sprint("value must be inside range (", *r.gt, ", ", *r.lte, "]"))
			}
		} else if v > *r.lte && v <= *r.gt {
			fails = append(fails, fmt.Sprint("value must be outside range (", *r.lte, ", ", *r.gt, "]"))
		}
	case r.lte != nil && r.gte != nil:
		if *r.lte > *r.gte {
			if v < *r.gte || v > *r.lte {
				fails = append(fails, fmt.Sprint("value must be inside range [", *r.gte, ", ", *r.lte, "]"))
			}
		} else if v > *r.lte && v < *r.gte {
			fails = append(fails, fmt.Sprint("value must be outside range (", *r.lte, ", ", *r.gte, ")"))
		}
	case r.lte != nil:
		if v > *r.lte {
			fails = append(fails, fmt.Sprint("value must be less than or equal to ", *r.lte))
		}
	case r.gt != nil:
		if v <= *r.gt {
			fails = append(fails, fmt.Sprint("value must be greater than ", *r.gt))
		}
	case r.gte != nil:
		if v < *r.gte {
			fails = append(fails, fmt.Sprint("value must be greater than or equal to ", *r.gte))
		}
	}
	if len(r.in) > 0 {
		if !slices.Contains(r.in, v) {
			fails = append(fails, fmt.Sprint("value must be in list ", r.in))
		}
	} else if len(r.notIn) > 0 && slices.Contains(r.notIn, v) {
		fails = append(fails, fmt.Sprint("value must not be in list ", r.notIn))
	}
	return fails
}
