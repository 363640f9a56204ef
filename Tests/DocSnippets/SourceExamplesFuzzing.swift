@_spi(Testing) import InboxLedger
let verdict = DecoderFuzzing.run([0] + recordBytes)   // "record: checksum mismatch …"

// Sources/InboxLedger/DecoderFuzzing.swift's example (above, a file of its own for its
// import): a record's bytes.
let recordBytes: [UInt8] = []
