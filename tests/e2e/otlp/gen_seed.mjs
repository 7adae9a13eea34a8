// Writes fuzz/corpus/otlp/small.pb and tests/unit/ingest/testdata/otlp-small.pb: a small
// ExportProfilesServiceRequest encoded by protobufjs (run from tests/e2e/otlp:
//   node gen_seed.mjs ../../../fuzz/corpus/otlp/small.pb)
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
const protobuf = (await import('./node_modules/protobufjs/index.js')).default;
const root = new protobuf.Root();
const inc = path.join(path.dirname(new URL(import.meta.url).pathname), '..', '..', '..', 'third_party', 'opentelemetry-proto');
root.resolvePath = (o, t) => path.join(inc, t);
await root.load('opentelemetry/proto/collector/profiles/v1development/profiles_service.proto');
const Req = root.lookupType('opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest');
// a small request: 2 functions, 2 locations, 2 stacks, attributes on samples and resource
const obj = {
  resourceProfiles: [{
    resource: { attributes: [{ key: 'service.name', value: { stringValue: 'svc' } }, { key: 'k8s.pod.name', value: { stringValue: 'p-1' } }, { key: 'n', value: { intValue: 3 } }, { key: 'arr', value: { arrayValue: { values: [{ stringValue: 'a' }] } } }] },
    scopeProfiles: [{ scope: { name: 's' }, profiles: [{
      sampleType: { typeStrindex: 1, unitStrindex: 2 }, periodType: { typeStrindex: 1, unitStrindex: 2 }, period: 10000000,
      timeUnixNano: 1700000000000000000, durationNano: 1000000000,
      samples: [{ stackIndex: 1, values: [30000000], attributeIndices: [1] }, { stackIndex: 2, values: [10000000] }, { stackIndex: 2, timestampsUnixNano: [1, 2, 3] }],
    }] }],
  }],
  dictionary: {
    stringTable: ['', 'cpu', 'nanoseconds', 'main', 'work', 'main.go', '/bin/app', 'thread', 'ms'],
    mappingTable: [{}, { memoryStart: 4096, memoryLimit: 65536, fileOffset: 0, filenameStrindex: 6 }],
    functionTable: [{}, { nameStrindex: 3, systemNameStrindex: 3, filenameStrindex: 5, startLine: 1 }, { nameStrindex: 4, systemNameStrindex: 4, filenameStrindex: 5, startLine: 9 }],
    locationTable: [{}, { mappingIndex: 1, address: 4200, lines: [{ functionIndex: 1, line: 3 }] }, { mappingIndex: 1, address: 4300, lines: [{ functionIndex: 2, line: 10 }, { functionIndex: 1, line: 4 }] }],
    stackTable: [{}, { locationIndices: [2, 1] }, { locationIndices: [1] }],
    attributeTable: [{}, { keyStrindex: 7, value: { stringValue: 'worker' } }, { keyStrindex: 8, value: { intValue: 5 }, unitStrindex: 8 }],
    linkTable: [{}],
  },
};
fs.writeFileSync(process.argv[2], Req.encode(Req.fromObject(obj)).finish());
