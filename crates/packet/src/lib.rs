//! Wire formats as typed views over byte slices, packet builders, and [`FlowKey`]
//! extraction: the bottom crate of ferrovs, which knows nothing of flows or ports.
//!
//! # What is here
//!
//! - [`key`]: the fixed-layout [`FlowKey`] (OVS `struct flow`) that every later stage — classifier,
//!   caches, pipeline — looks packets up by.
//! - [`mod@extract`]: bytes → the L2..L4 words of a `FlowKey`, with the exact semantics of OVS
//!   `miniflow_extract`, because traces are compared with OVS's.
//! - [`wire`]: one module per header (Ethernet, VLAN, MPLS, ARP, IPv4, IPv6 and its extension
//!   headers, TCP, UDP, SCTP, ICMPv4, ICMPv6 with Neighbor Discovery, VXLAN, Geneve), each a
//!   zero-copy view (`Packet<T: AsRef<[u8]>>`) plus an owned `Repr`, in the style of smoltcp. The
//!   crate root re-exports them with a prefix: [`Ipv4Packet`], [`Ipv4Repr`], …
//! - [`checksum`]: the Internet checksum (RFC 1071), incremental updates (RFC 1624), pseudo-header
//!   sums and CRC32c.
//! - [`builder`]: [`PacketBuilder`], which stacks headers and fills in every length, type and
//!   checksum, for tests and the traffic generator.
//!
//! # The no-panic contract
//!
//! Nothing in the data path of this crate panics on packet bytes:
//!
//! - [`extract()`] accepts any byte slice. Truncated and malformed headers end extraction early;
//!   [`ExtractInfo::stop`] says where and why. This is property-tested on arbitrary bytes and on
//!   mutated valid frames, and fuzzed (`fuzz/fuzz_targets/extract.rs`).
//! - A wire view built with `new_checked` has validated every length its accessors use, so no
//!   accessor panics afterwards. `new_unchecked` skips that validation: accessors may then panic on
//!   a short buffer (a bounds check, never undefined behaviour). Setters and `emit` need a buffer
//!   of at least `Repr::buffer_len()` bytes.
//! - There is no `unsafe` code (`#![forbid(unsafe_code)]`).
//!
//! Thread safety: everything here is plain data and pure functions; views borrow their
//! buffer, so the borrow checker rules out shared mutation.
//!
//! # Example
//!
//! Build a VLAN-tagged TCP/IPv4 frame, extract its key, then read and rewrite the IPv4
//! header through a view:
//!
//! ```
//! use packet::wire::ChecksumCaps;
//! use packet::{extract, EthernetFrame, FlowKey, Ipv4Packet, Ipv4Repr, PacketBuilder};
//!
//! let mut frame = PacketBuilder::ethernet([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
//!     .vlan(10, 0)
//!     .ipv4([192, 168, 0, 1], [192, 168, 0, 2])
//!     .tcp(40000, 443)
//!     .tcp_flags(0x002)
//!     .build();
//!
//! let mut key = FlowKey::default();
//! key.set_in_port(1);
//! let info = extract(&frame, &mut key);
//! assert_eq!(key.vlan_tci(), 0x1000 | 10);
//! assert_eq!((key.nw_proto(), key.tp_dst(), key.tcp_flags()), (6, 443, 0x002));
//! assert!(info.stop.is_none());
//!
//! // The IPv4 header starts where extraction says L3 starts.
//! let l3 = info.l3.expect("an Ethernet frame has an L3 offset");
//! let eth = EthernetFrame::new_checked(&frame[..]).expect("valid frame");
//! assert_eq!(u16::from(eth.ethertype()), 0x8100);
//! let caps = ChecksumCaps::default();
//! let ip = Ipv4Packet::new_checked(&frame[l3..]).expect("valid IPv4");
//! let mut repr = Ipv4Repr::parse(&ip, &caps).expect("valid header");
//! repr.hop_limit -= 1;
//! repr.emit(&mut Ipv4Packet::new_unchecked(&mut frame[l3..]), &caps)
//!     .expect("emit");
//! extract(&frame, &mut key);
//! assert_eq!(key.nw_ttl(), 63);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod builder;
pub mod checksum;
pub mod extract;
pub mod key;
pub mod wire;

pub use builder::PacketBuilder;
pub use extract::{extract, ExtractInfo, ParseStop, StopReason};
pub use key::{FlowKey, KeyField, KEY_WORDS};
pub use wire::arp::{Operation as ArpOperation, Packet as ArpPacket, Repr as ArpRepr};
pub use wire::ethernet::{
    Address as EthernetAddress, EtherType, Frame as EthernetFrame, Repr as EthernetRepr,
};
pub use wire::geneve::{Packet as GenevePacket, Repr as GeneveRepr};
pub use wire::icmpv4::{Message as Icmpv4Message, Packet as Icmpv4Packet, Repr as Icmpv4Repr};
pub use wire::icmpv6::{
    Message as Icmpv6Message, NdRepr, Packet as Icmpv6Packet, Repr as Icmpv6Repr,
};
pub use wire::ip::{Address as IpAddress, Protocol as IpProtocol};
pub use wire::ipv4::{Packet as Ipv4Packet, Repr as Ipv4Repr};
pub use wire::ipv6::{
    ExtHeader as Ipv6ExtHeader, ExtHeaderRepr as Ipv6ExtHeaderRepr,
    FragmentHeader as Ipv6FragmentHeader, FragmentRepr as Ipv6FragmentRepr, Packet as Ipv6Packet,
    Repr as Ipv6Repr,
};
pub use wire::mpls::{Lse as MplsLse, Repr as MplsRepr};
pub use wire::sctp::{Packet as SctpPacket, Repr as SctpRepr};
pub use wire::tcp::{Flags as TcpFlags, Packet as TcpPacket, Repr as TcpRepr};
pub use wire::udp::{Packet as UdpPacket, Repr as UdpRepr};
pub use wire::vlan::{Repr as VlanRepr, Tag as VlanTag};
pub use wire::vxlan::{Packet as VxlanPacket, Repr as VxlanRepr};
pub use wire::{ChecksumCaps, Error as WireError};
