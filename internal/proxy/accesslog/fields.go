package accesslog

import (
	"google.golang.org/protobuf/reflect/protoreflect"
)

// This file is the access log's field audit: every field of an AccessLog,
// the file logger's config and its format is honoured (Build reads it) or
// refused by name with the fix, so that an update asking for a log strait
// would write differently is NACKed rather than logged wrongly.
// TestAccessLogFieldsClassified fails on a field in neither list.

// accessLogHonoured maps each honoured AccessLog field to the code that
// reads it.
var accessLogHonoured = map[protoreflect.Name]string{
	"name":         "Build: the logger's name in errors",
	"typed_config": "Build: envoy.access_loggers.file only",
}

// accessLogRefused maps each refused AccessLog field to why, and the fix.
var accessLogRefused = map[protoreflect.Name]string{
	"filter": "every request and connection is logged; remove it",
}

// fileLogHonoured maps each honoured FileAccessLog field to the code that
// reads it.
var fileLogHonoured = map[protoreflect.Name]string{
	"path":       "Build: Files.Open",
	"log_format": "buildFormat",
}

// fileLogRefused maps each refused FileAccessLog field to why, and the
// fix.
var fileLogRefused = map[protoreflect.Name]string{
	"format":            "deprecated; use log_format.text_format_source",
	"json_format":       "deprecated; use log_format.json_format",
	"typed_json_format": "deprecated; use log_format.json_format",
}

// formatHonoured maps each honoured SubstitutionFormatString field to the
// code that reads it.
var formatHonoured = map[protoreflect.Name]string{
	"text_format":         "buildFormat: ParseText",
	"text_format_source":  "buildFormat: ParseText of an inline data source (dataSourceFields)",
	"json_format":         "buildFormat: ParseJSON",
	"json_format_options": "buildFormat (jsonFormatOptionsFields): ParseJSON always writes the keys sorted",
}

// formatRefused maps each refused SubstitutionFormatString field to why,
// and the fix.
var formatRefused = map[protoreflect.Name]string{
	"omit_empty_values": "an empty value is written as \"-\" (text) or null (JSON); remove it",
	"content_type":      "access logs have no content type; remove it",
	"formatters":        "no formatter extension is loaded; remove it",
}

// Allow-lists of the messages a format carries.
var (
	// jsonFormatOptionsFields: the keys are always sorted, which honours
	// sort_properties either way.
	jsonFormatOptionsFields = map[protoreflect.Name]bool{"sort_properties": true}
	// dataSourceFields: a text_format_source is inline (filename and
	// environment_variable are refused by buildFormat's switch).
	dataSourceFields = map[protoreflect.Name]bool{
		"inline_string": true, "inline_bytes": true, "filename": true, "environment_variable": true,
	}
)
