package mapping

// knownProtoFiles are the dependencies Confluent's schema registry bundles
// and its Protobuf serializers do not register as references
// (skip.known.types, true by default): a schema may import them with no
// reference, and the ProtobufConverter does (a Connect Decimal as
// confluent.type.Decimal, a Date as google.type.Date, a Time as
// google.type.TimeOfDay). They are written here from the messages' field
// numbers and types, which are what decoding needs; a reference the
// registry gives under the same name takes their place.
var knownProtoFiles = map[string]string{
	"confluent/meta.proto": `syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
message Meta {
  string doc = 1;
  map<string, string> params = 2;
  repeated string tags = 3;
}
extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
`,
	"confluent/type/decimal.proto": `syntax = "proto3";
package confluent.type;
message Decimal {
  bytes value = 1;
  uint32 precision = 2;
  int32 scale = 3;
}
`,
	"google/type/date.proto": `syntax = "proto3";
package google.type;
message Date {
  int32 year = 1;
  int32 month = 2;
  int32 day = 3;
}
`,
	"google/type/timeofday.proto": `syntax = "proto3";
package google.type;
message TimeOfDay {
  int32 hours = 1;
  int32 minutes = 2;
  int32 seconds = 3;
  int32 nanos = 4;
}
`,
	"google/type/money.proto": `syntax = "proto3";
package google.type;
message Money {
  string currency_code = 1;
  int64 units = 2;
  int32 nanos = 3;
}
`,
	"google/type/latlng.proto": `syntax = "proto3";
package google.type;
message LatLng {
  double latitude = 1;
  double longitude = 2;
}
`,
	"google/type/dayofweek.proto": `syntax = "proto3";
package google.type;
enum DayOfWeek {
  DAY_OF_WEEK_UNSPECIFIED = 0;
  MONDAY = 1;
  TUESDAY = 2;
  WEDNESDAY = 3;
  THURSDAY = 4;
  FRIDAY = 5;
  SATURDAY = 6;
  SUNDAY = 7;
}
`,
	"google/type/month.proto": `syntax = "proto3";
package google.type;
enum Month {
  MONTH_UNSPECIFIED = 0;
  JANUARY = 1;
  FEBRUARY = 2;
  MARCH = 3;
  APRIL = 4;
  MAY = 5;
  JUNE = 6;
  JULY = 7;
  AUGUST = 8;
  SEPTEMBER = 9;
  OCTOBER = 10;
  NOVEMBER = 11;
  DECEMBER = 12;
}
`,
}

// withKnownProtoFiles returns files with the known dependencies it lacks.
func withKnownProtoFiles(files map[string]string) map[string]string {
	out := make(map[string]string, len(files)+len(knownProtoFiles))
	for name, src := range knownProtoFiles {
		out[name] = src
	}
	for name, src := range files {
		out[name] = src
	}
	return out
}
