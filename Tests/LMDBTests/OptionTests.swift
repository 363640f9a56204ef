import CLMDB
import Testing
@testable import LMDB

/// Every option member equals its C constant (a flag copied wrongly is a silent bug).
@Suite struct OptionTests {
    @Test func environmentFlags() {
        #expect(EnvironmentFlags.fixedMap.rawValue == UInt32(MDB_FIXEDMAP))
        #expect(EnvironmentFlags.noSubdirectory.rawValue == UInt32(MDB_NOSUBDIR))
        #expect(EnvironmentFlags.noSync.rawValue == UInt32(MDB_NOSYNC))
        #expect(EnvironmentFlags.readOnly.rawValue == UInt32(MDB_RDONLY))
        #expect(EnvironmentFlags.noMetaSync.rawValue == UInt32(MDB_NOMETASYNC))
        #expect(EnvironmentFlags.writeMap.rawValue == UInt32(MDB_WRITEMAP))
        #expect(EnvironmentFlags.mapAsync.rawValue == UInt32(MDB_MAPASYNC))
        #expect(EnvironmentFlags.noThreadLocalStorage.rawValue == UInt32(MDB_NOTLS))
        #expect(EnvironmentFlags.noLock.rawValue == UInt32(MDB_NOLOCK))
        #expect(EnvironmentFlags.noReadAhead.rawValue == UInt32(MDB_NORDAHEAD))
        #expect(EnvironmentFlags.noMemoryInitialization.rawValue == UInt32(MDB_NOMEMINIT))
    }

    @Test func databaseFlags() {
        #expect(DatabaseFlags.reverseKey.rawValue == UInt32(MDB_REVERSEKEY))
        #expect(DatabaseFlags.duplicateSort.rawValue == UInt32(MDB_DUPSORT))
        #expect(DatabaseFlags.integerKey.rawValue == UInt32(MDB_INTEGERKEY))
        #expect(DatabaseFlags.duplicateFixed.rawValue == UInt32(MDB_DUPFIXED))
        #expect(DatabaseFlags.integerDuplicate.rawValue == UInt32(MDB_INTEGERDUP))
        #expect(DatabaseFlags.reverseDuplicate.rawValue == UInt32(MDB_REVERSEDUP))
        #expect(DatabaseFlags.create.rawValue == UInt32(MDB_CREATE))
    }

    @Test func writeFlags() {
        #expect(WriteFlags.noOverwrite.rawValue == UInt32(MDB_NOOVERWRITE))
        #expect(WriteFlags.noDuplicateData.rawValue == UInt32(MDB_NODUPDATA))
        #expect(WriteFlags.current.rawValue == UInt32(MDB_CURRENT))
        #expect(WriteFlags.reserve.rawValue == UInt32(MDB_RESERVE))
        #expect(WriteFlags.append.rawValue == UInt32(MDB_APPEND))
        #expect(WriteFlags.appendDuplicate.rawValue == UInt32(MDB_APPENDDUP))
        #expect(WriteFlags.multiple.rawValue == UInt32(MDB_MULTIPLE))
    }

    @Test func copyFlags() {
        #expect(CopyFlags.compact.rawValue == UInt32(MDB_CP_COMPACT))
    }

    @Test func durabilityFlags() {
        #expect(Durability.durable.flags == [])
        #expect(Durability.singleSync.flags == .noMetaSync)
        #expect(Durability.none.flags == .noSync)
        #expect(Durability.none.strongest(.singleSync) == .singleSync)
        #expect(Durability.durable.strongest(.none) == .durable)
    }

    @Test func errorCodes() {
        let pairs: [(LMDBError, Int32)] = [
            (.keyExists, MDB_KEYEXIST), (.notFound, MDB_NOTFOUND), (.pageNotFound, MDB_PAGE_NOTFOUND),
            (.corrupted, MDB_CORRUPTED), (.panic, MDB_PANIC), (.versionMismatch, MDB_VERSION_MISMATCH),
            (.invalid, MDB_INVALID), (.mapFull, MDB_MAP_FULL), (.databasesFull, MDB_DBS_FULL),
            (.readersFull, MDB_READERS_FULL), (.threadLocalStorageFull, MDB_TLS_FULL),
            (.transactionFull, MDB_TXN_FULL), (.cursorFull, MDB_CURSOR_FULL), (.pageFull, MDB_PAGE_FULL),
            (.mapResized, MDB_MAP_RESIZED), (.incompatible, MDB_INCOMPATIBLE), (.badReaderSlot, MDB_BAD_RSLOT),
            (.badTransaction, MDB_BAD_TXN), (.badValueSize, MDB_BAD_VALSIZE), (.badDatabase, MDB_BAD_DBI),
        ]
        for (error, code) in pairs {
            #expect(error.rawValue == code)
            #expect(!error.message.isEmpty)
            #expect(error.message == String(cString: mdb_strerror(code)))
        }
        #expect(LMDBError.mapFull.message == "MDB_MAP_FULL: Environment mapsize limit reached")
        #expect(LMDBError.noSpace.message == "No space left on device")
    }

    @Test func errorPatternMatching() {
        let error: any Error = LMDBError(rawValue: MDB_MAP_FULL)
        var matched = false
        switch error {
        case LMDBError.keyExists: matched = false
        case LMDBError.mapFull: matched = true
        default: matched = false
        }
        #expect(matched)
    }
}
