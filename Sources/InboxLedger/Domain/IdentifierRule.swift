import Foundation

/// The one rule for identifiers the ledger stores and sync carries — message ids, action ids,
/// idempotency keys, a device ledger's id: compared **byte for byte** (their UTF-8), so only
/// text in Unicode Normalization Form C (two spellings of one text would otherwise be two
/// messages), and no U+0000 (PostgreSQL, the sync server's store, cannot hold it in text).
/// The ledger refuses such an identifier at append (``LedgerError/invalidEvent(index:field:reason:)``,
/// nothing written); the sync server refuses it by the same function, so what one accepts
/// the other does (docs/semantics.md, "Identifiers").
///
/// ```swift
/// let fine = IdentifierRule.problem("m42")          // nil
/// let refused = IdentifierRule.problem("e\u{301}")  // "is not in Unicode Normalization Form C …"
/// ```
public enum IdentifierRule {
    /// Why `text` cannot be an identifier, or nil when it can. ASCII text costs one pass over
    /// its bytes; only other text is normalised to be compared.
    public static func problem(_ text: String) -> String? {
        var ascii = true
        for byte in text.utf8 {
            if byte == 0 { return "contains U+0000 (NUL), which no text column can hold" }
            if byte >= 0x80 { ascii = false }
        }
        if !ascii, !text.precomposedStringWithCanonicalMapping.utf8.elementsEqual(text.utf8) {
            return "is not in Unicode Normalization Form C (identifiers are compared byte for byte: send the NFC form)"
        }
        return nil
    }
}
