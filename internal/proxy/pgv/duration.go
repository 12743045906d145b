package pgv

import (
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
)

func durationOf(m protoreflect.Message) *durationpb.Duration {
	fs := m.Descriptor().Fields()
	return &durationpb.Duration{Seconds: m.Get(fs.ByNumber(1)).Int(), Nanos: int32(m.Get(fs.ByNumber(2)).Int())}
}

func (rc *ruleCtx) checkDuration(rep *report, at loc, v protoreflect.Value, has bool) {
	r := rc.duration
	if r.GetRequired() && !has {
		rep.fail(at, "value is required")
	}
	if !has || (r.Const == nil && r.Lt == nil && r.Lte == nil && r.Gt == nil && r.Gte == nil) {
		return
	}
	d := durationOf(v.Message())
	dur, err := d.AsDuration(), d.CheckValid()
	if err != nil {
		rep.failCause(at, "value is not a valid duration", err)
		return
	}
	str := func(x *durationpb.Duration) string { return x.AsDuration().String() }
	if r.Const != nil && dur != r.Const.AsDuration() {
		rep.fail(at, "value must equal "+str(r.Const))
	}
	lt, lte, gt, gte := r.Lt.AsDuration(), r.Lte.AsDuration(), r.Gt.AsDuration(), r.Gte.AsDuration()
	switch {
	case r.Lt != nil && r.Gt != nil:
		if lt > gt {
			if dur <= gt || dur >= lt {
				rep.fail(at, "value must be inside range ("+str(r.Gt)+", "+str(r.Lt)+")")
			}
		} else if dur >= lt && dur <= gt {
			rep.fail(at, "value must be outside range ["+str(r.Lt)+", "+str(r.Gt)+"]")
		}
	case r.Lt != nil && r.Gte != nil:
		if lt > gte {
			if dur < gte || dur >= lt {
				rep.fail(at, "value must be inside range ["+str(r.Gte)+", "+str(r.Lt)+")")
			}
		} else if dur >= lt && dur < gte {
			rep.fail(at, "value must be outside range ["+str(r.Lt)+", "+str(r.Gte)+")")
		}
	case r.Lt != nil:
		if dur >= lt {
			rep.fail(at, "value must be less than "+str(r.Lt))
		}
	case r.Lte != nil && r.Gt != nil:
		if lte > gt {
			if dur <= gt || dur > lte {
				rep.fail(at, "value must be inside range ("+str(r.Gt)+", "+str(r.Lte)+"]")
			}
		} else if dur > lte && dur <= gt {
			rep.fail(at, "value must be outside range ("+str(r.Lte)+", "+str(r.Gt)+"]")
		}
	case r.Lte != nil && r.Gte != nil:
		if lte > gte {
			if dur < gte || dur > lte {
				rep.fail(at, "value must be inside range ["+str(r.Gte)+", "+str(r.Lte)+"]")
			}
		} else if dur > lte && dur < gte {
			rep.fail(at, "value must be outside range ("+str(r.Lte)+", "+str(r.Gte)+")")
		}
	case r.Lte != nil:
		if dur > lte {
			rep.fail(at, "value must be less than or equal to "+str(r.Lte))
		}
	case r.Gt != nil:
		if dur <= gt {
			rep.fail(at, "value must be greater than "+str(r.Gt))
		}
	case r.Gte != nil:
		if dur < gte {
			rep.fail(at, "value must be greater than or equal to "+str(r.Gte))
		}
	}
}
