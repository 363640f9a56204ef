// The keys of an environment's attachments (``Environment/attachment(_:make:)``).

/// The key of an attachment (``Environment/attachment(_:make:)``): its name and the type of
/// the object it holds, so that a key can only ever return what it was made with.
///
/// ```swift
/// final class Counter: Sendable {}
/// let counterKey = AttachmentKey<Counter>("com.example.counter")
/// let counter = environment.attachment(counterKey) { Counter() }
/// ```
public struct AttachmentKey<Value: AnyObject & Sendable>: Sendable, Hashable {
    /// The key's name; two keys of one name and type reach the same object.
    public let name: String

    /// A key named `name` for objects of type `Value`.
    public init(_ name: String) {
        self.name = name
    }

    /// The key of the attachment table: the name and the value's type.
    var erased: ErasedAttachmentKey { ErasedAttachmentKey(name: name, type: ObjectIdentifier(Value.self)) }
}

/// An ``AttachmentKey`` without its type parameter (what the table is keyed by).
struct ErasedAttachmentKey: Hashable, Sendable {
    let name: String
    let type: ObjectIdentifier
}
