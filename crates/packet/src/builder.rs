//! A small packet builder for tests and the traffic generator.
//!
//! Layers are stacked outermost first, and [`PacketBuilder::build`] serializes them with
//! every length, type and checksum field filled in from the layers that follow: the
//! Ethernet type is the next layer's ethertype (or the 802.3 length before LLC), the IP
//! protocol is the next layer's protocol number, MPLS sets bottom-of-stack on its last
//! entry, and TCP, UDP, SCTP, ICMPv4 and ICMPv6 checksums are computed over the nearest
//! enclosing IP header's pseudo-header. Modifier methods (`ttl`, `tos`, `ethertype`, …)
//! change the most recently added layer and are ignored if it has no such field.
//!
//! ```
//! use packet::builder::PacketBuilder;
//! let frame = PacketBuilder::ethernet([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
//!     .vlan(10, 3)
//!     .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
//!     .udp(5000, 4789)
//!     .vxlan(42)
//!     .ethernet_inner([2, 0, 0, 0, 0, 3], [2, 0, 0, 0, 0, 4])
//!     .arp_request([2, 0, 0, 0, 0, 3], [192, 168, 0, 1], [192, 168, 0, 2])
//!     .build();
//! assert_eq!(frame.len(), 14 + 4 + 20 + 8 + 8 + 14 + 28);
//! assert_eq!(&frame[12..14], &[0x81, 0x00]);
//! ```

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;

/// IPv6 extension header kinds the builder emits (RFC 8200 § 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv6ExtKind {
    /// Hop-by-hop options (next header 0).
    HopByHop,
    /// Routing header (43).
    Routing,
    /// Destination options (60).
    DestinationOptions,
    /// Authentication header (51, RFC 4302).
    Authentication,
}

impl Ipv6ExtKind {
    fn protocol(self) -> u8 {
        match self {
            Ipv6ExtKind::HopByHop => 0,
            Ipv6ExtKind::Routing => 43,
            Ipv6ExtKind::DestinationOptions => 60,
            Ipv6ExtKind::Authentication => 51,
        }
    }
}

#[derive(Debug, Clone)]
enum Layer {
    Ethernet {
        src: [u8; 6],
        dst: [u8; 6],
        ethertype: Option<u16>,
    },
    Vlan {
        tpid: u16,
        tci: u16,
        ethertype: Option<u16>,
    },
    Llc {
        dsap: u8,
        ssap: u8,
        control: u8,
    },
    LlcSnap {
        ethertype: Option<u16>,
    },
    Mpls {
        label: u32,
        tc: u8,
        ttl: u8,
    },
    Arp {
        ethertype: u16,
        op: u16,
        sha: [u8; 6],
        spa: Ipv4Addr,
        tha: [u8; 6],
        tpa: Ipv4Addr,
    },
    Ipv4 {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        tos: u8,
        ttl: u8,
        ident: u16,
        dont_frag: bool,
        more_frags: bool,
        frag_offset: u16,
        options: Vec<u8>,
        protocol: Option<u8>,
    },
    Ipv6 {
        src: Ipv6Addr,
        dst: Ipv6Addr,
        traffic_class: u8,
        flow_label: u32,
        hop_limit: u8,
        protocol: Option<u8>,
    },
    Ipv6Ext {
        kind: Ipv6ExtKind,
        body: Vec<u8>,
        protocol: Option<u8>,
    },
    Ipv6Frag {
        offset: u16,
        more: bool,
        ident: u32,
        protocol: Option<u8>,
    },
    Tcp {
        src: u16,
        dst: u16,
        seq: u32,
        ack: u32,
        flags: u16,
        window: u16,
        options: Vec<u8>,
    },
    Udp {
        src: u16,
        dst: u16,
    },
    Sctp {
        src: u16,
        dst: u16,
        vtag: u32,
    },
    Icmpv4 {
        ty: u8,
        code: u8,
        rest: [u8; 4],
    },
    Icmpv6 {
        ty: u8,
        code: u8,
        body: Vec<u8>,
    },
    Vxlan {
        vni: u32,
    },
    Geneve {
        vni: u32,
        protocol: u16,
        options: Vec<u8>,
    },
}

impl Layer {
    /// The ethertype that announces this layer.
    fn ethertype(&self) -> Option<u16> {
        Some(match self {
            Layer::Vlan { tpid, .. } => *tpid,
            Layer::Mpls { .. } => 0x8847,
            Layer::Arp { ethertype, .. } => *ethertype,
            Layer::Ipv4 { .. } => 0x0800,
            Layer::Ipv6 { .. } => 0x86dd,
            Layer::Ethernet { .. } => 0x6558,
            _ => return None,
        })
    }

    /// The IP protocol number that announces this layer.
    fn protocol(&self) -> Option<u8> {
        Some(match self {
            Layer::Ipv4 { .. } => 4,
            Layer::Ipv6 { .. } => 41,
            Layer::Ipv6Ext { kind, .. } => kind.protocol(),
            Layer::Ipv6Frag { .. } => 44,
            Layer::Tcp { .. } => 6,
            Layer::Udp { .. } => 17,
            Layer::Sctp { .. } => 132,
            Layer::Icmpv4 { .. } => 1,
            Layer::Icmpv6 { .. } => 58,
            _ => return None,
        })
    }
}

/// Builds a packet layer by layer; see the module documentation.
#[derive(Debug, Clone, Default)]
pub struct PacketBuilder {
    layers: Vec<Layer>,
    payload: Vec<u8>,
}

/// Ethertype used when nothing follows an Ethernet header and none was given (IEEE 802
/// local experimental ethertype 1).
pub const DEFAULT_ETHERTYPE: u16 = 0x88b5;

impl PacketBuilder {
    /// Starts a frame with an Ethernet II header (IEEE 802.3 § 3.1.1).
    pub fn ethernet(src: [u8; 6], dst: [u8; 6]) -> Self {
        PacketBuilder::default().ethernet_inner(src, dst)
    }

    /// Starts a packet with no Ethernet header (an L3 packet, for tunnels or tests of a
    /// single header).
    pub fn new() -> Self {
        PacketBuilder::default()
    }

    fn push(mut self, layer: Layer) -> Self {
        self.layers.push(layer);
        self
    }

    /// Adds an inner Ethernet header (after VXLAN or Geneve).
    pub fn ethernet_inner(self, src: [u8; 6], dst: [u8; 6]) -> Self {
        self.push(Layer::Ethernet {
            src,
            dst,
            ethertype: None,
        })
    }

    /// Adds an 802.1Q tag (TPID 0x8100) with VLAN id `vid` and priority `pcp`.
    pub fn vlan(self, vid: u16, pcp: u8) -> Self {
        self.vlan_tag(0x8100, (u16::from(pcp & 7) << 13) | (vid & 0x0fff))
    }

    /// Adds an 802.1ad service tag (TPID 0x88a8).
    pub fn vlan_ad(self, vid: u16, pcp: u8) -> Self {
        self.vlan_tag(0x88a8, (u16::from(pcp & 7) << 13) | (vid & 0x0fff))
    }

    /// Adds a tag with an arbitrary TPID and raw TCI (PCP | DEI | VID).
    pub fn vlan_tag(self, tpid: u16, tci: u16) -> Self {
        self.push(Layer::Vlan {
            tpid,
            tci,
            ethertype: None,
        })
    }

    /// Adds an IEEE 802.2 LLC header; the Ethernet type field becomes the 802.3 length.
    pub fn llc(self, dsap: u8, ssap: u8, control: u8) -> Self {
        self.push(Layer::Llc {
            dsap,
            ssap,
            control,
        })
    }

    /// Adds an LLC/SNAP header (RFC 1042) whose protocol id is the next layer's ethertype.
    pub fn llc_snap(self) -> Self {
        self.push(Layer::LlcSnap { ethertype: None })
    }

    /// Adds an MPLS label stack entry (RFC 3032); the last one gets bottom-of-stack.
    pub fn mpls(self, label: u32, tc: u8, ttl: u8) -> Self {
        self.push(Layer::Mpls { label, tc, ttl })
    }

    /// Adds an Ethernet/IPv4 ARP packet (RFC 826).
    pub fn arp(
        self,
        op: u16,
        sha: [u8; 6],
        spa: impl Into<Ipv4Addr>,
        tha: [u8; 6],
        tpa: impl Into<Ipv4Addr>,
    ) -> Self {
        self.push(Layer::Arp {
            ethertype: 0x0806,
            op,
            sha,
            spa: spa.into(),
            tha,
            tpa: tpa.into(),
        })
    }

    /// Adds an ARP request (op 1) from `sha`/`spa` for `tpa`.
    pub fn arp_request(
        self,
        sha: [u8; 6],
        spa: impl Into<Ipv4Addr>,
        tpa: impl Into<Ipv4Addr>,
    ) -> Self {
        self.arp(1, sha, spa, [0; 6], tpa)
    }

    /// Adds a RARP packet (ethertype 0x8035, RFC 903).
    pub fn rarp(
        self,
        op: u16,
        sha: [u8; 6],
        spa: impl Into<Ipv4Addr>,
        tha: [u8; 6],
        tpa: impl Into<Ipv4Addr>,
    ) -> Self {
        self.push(Layer::Arp {
            ethertype: 0x8035,
            op,
            sha,
            spa: spa.into(),
            tha,
            tpa: tpa.into(),
        })
    }

    /// Adds an IPv4 header (RFC 791) with TTL 64 and the DF bit clear.
    pub fn ipv4(self, src: impl Into<Ipv4Addr>, dst: impl Into<Ipv4Addr>) -> Self {
        self.push(Layer::Ipv4 {
            src: src.into(),
            dst: dst.into(),
            tos: 0,
            ttl: 64,
            ident: 0,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
            options: Vec::new(),
            protocol: None,
        })
    }

    /// Adds an IPv6 header (RFC 8200) with hop limit 64.
    pub fn ipv6(self, src: impl Into<Ipv6Addr>, dst: impl Into<Ipv6Addr>) -> Self {
        self.push(Layer::Ipv6 {
            src: src.into(),
            dst: dst.into(),
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 64,
            protocol: None,
        })
    }

    /// Adds an IPv6 extension header whose data (after next header and length) is `body`,
    /// zero-padded (Pad1 options) to a multiple of 8 bytes in all (4 for AH).
    pub fn ipv6_ext(self, kind: Ipv6ExtKind, body: &[u8]) -> Self {
        self.push(Layer::Ipv6Ext {
            kind,
            body: body.to_vec(),
            protocol: None,
        })
    }

    /// Adds an IPv6 fragment header (RFC 8200 § 4.5); `offset` in 8-byte units.
    pub fn ipv6_fragment(self, offset: u16, more: bool, ident: u32) -> Self {
        self.push(Layer::Ipv6Frag {
            offset,
            more,
            ident,
            protocol: None,
        })
    }

    /// Adds a TCP header (RFC 9293) with the ACK flag clear, window 65535.
    pub fn tcp(self, src: u16, dst: u16) -> Self {
        self.push(Layer::Tcp {
            src,
            dst,
            seq: 0,
            ack: 0,
            flags: 0,
            window: 0xffff,
            options: Vec::new(),
        })
    }

    /// Adds a UDP header (RFC 768).
    pub fn udp(self, src: u16, dst: u16) -> Self {
        self.push(Layer::Udp { src, dst })
    }

    /// Adds an SCTP common header (RFC 9260 § 3.1) with a CRC32c checksum.
    pub fn sctp(self, src: u16, dst: u16, vtag: u32) -> Self {
        self.push(Layer::Sctp { src, dst, vtag })
    }

    /// Adds an ICMPv4 header (RFC 792) with the 4 bytes after the checksum.
    pub fn icmpv4(self, ty: u8, code: u8, rest: [u8; 4]) -> Self {
        self.push(Layer::Icmpv4 { ty, code, rest })
    }

    /// Adds an ICMPv4 echo request (type 8).
    pub fn icmpv4_echo_request(self, ident: u16, seq: u16) -> Self {
        let [a, b] = ident.to_be_bytes();
        let [c, d] = seq.to_be_bytes();
        self.icmpv4(8, 0, [a, b, c, d])
    }

    /// Adds an ICMPv6 message (RFC 4443) whose bytes after the checksum are `body`.
    pub fn icmpv6(self, ty: u8, code: u8, body: &[u8]) -> Self {
        self.push(Layer::Icmpv6 {
            ty,
            code,
            body: body.to_vec(),
        })
    }

    /// Adds a Neighbor Solicitation (RFC 4861 § 4.3) with an optional source link-layer
    /// address option.
    pub fn icmpv6_ns(self, target: impl Into<Ipv6Addr>, sll: Option<[u8; 6]>) -> Self {
        let mut body = vec![0u8; 4];
        body.extend_from_slice(&target.into().octets());
        if let Some(mac) = sll {
            body.extend_from_slice(&[1, 1]);
            body.extend_from_slice(&mac);
        }
        self.icmpv6(135, 0, &body)
    }

    /// Adds a Neighbor Advertisement (RFC 4861 § 4.4) with R/S/O `flags` (top 3 bits of
    /// the first byte) and an optional target link-layer address option.
    pub fn icmpv6_na(self, flags: u8, target: impl Into<Ipv6Addr>, tll: Option<[u8; 6]>) -> Self {
        let mut body = vec![flags, 0, 0, 0];
        body.extend_from_slice(&target.into().octets());
        if let Some(mac) = tll {
            body.extend_from_slice(&[2, 1]);
            body.extend_from_slice(&mac);
        }
        self.icmpv6(136, 0, &body)
    }

    /// Adds a VXLAN header (RFC 7348 § 5) with the I flag set.
    pub fn vxlan(self, vni: u32) -> Self {
        self.push(Layer::Vxlan { vni })
    }

    /// Adds a Geneve header (RFC 8926 § 3.4) carrying Ethernet (0x6558), with raw option
    /// TLV bytes (a multiple of 4).
    pub fn geneve(self, vni: u32, options: &[u8]) -> Self {
        self.push(Layer::Geneve {
            vni,
            protocol: 0x6558,
            options: options.to_vec(),
        })
    }

    /// Appends payload bytes after the last header.
    pub fn payload(mut self, data: &[u8]) -> Self {
        self.payload.extend_from_slice(data);
        self
    }

    /// Sets the type field of the last Ethernet, VLAN or LLC/SNAP layer (used when no
    /// layer follows, or to lie).
    pub fn ethertype(mut self, value: u16) -> Self {
        match self.layers.last_mut() {
            Some(
                Layer::Ethernet { ethertype, .. }
                | Layer::Vlan { ethertype, .. }
                | Layer::LlcSnap { ethertype },
            ) => *ethertype = Some(value),
            Some(Layer::Geneve { protocol, .. }) => *protocol = value,
            _ => {}
        }
        self
    }

    /// Sets the protocol / next header field of the last IP or IPv6 extension layer.
    pub fn protocol(mut self, value: u8) -> Self {
        if let Some(
            Layer::Ipv4 { protocol, .. }
            | Layer::Ipv6 { protocol, .. }
            | Layer::Ipv6Ext { protocol, .. }
            | Layer::Ipv6Frag { protocol, .. },
        ) = self.layers.last_mut()
        {
            *protocol = Some(value);
        }
        self
    }

    /// Sets the TTL / hop limit of the last IP layer.
    pub fn ttl(mut self, value: u8) -> Self {
        if let Some(Layer::Ipv4 { ttl, .. } | Layer::Ipv6 { hop_limit: ttl, .. }) =
            self.layers.last_mut()
        {
            *ttl = value;
        }
        self
    }

    /// Sets the TOS / traffic class of the last IP layer.
    pub fn tos(mut self, value: u8) -> Self {
        if let Some(
            Layer::Ipv4 { tos, .. }
            | Layer::Ipv6 {
                traffic_class: tos, ..
            },
        ) = self.layers.last_mut()
        {
            *tos = value;
        }
        self
    }

    /// Sets the flow label of the last IPv6 layer.
    pub fn flow_label(mut self, value: u32) -> Self {
        if let Some(Layer::Ipv6 { flow_label, .. }) = self.layers.last_mut() {
            *flow_label = value & 0x000f_ffff;
        }
        self
    }

    /// Sets the identification of the last IPv4 layer.
    pub fn ident(mut self, value: u16) -> Self {
        if let Some(Layer::Ipv4 { ident, .. }) = self.layers.last_mut() {
            *ident = value;
        }
        self
    }

    /// Sets the fragment fields of the last IPv4 layer (`offset` in 8-byte units).
    pub fn fragment(mut self, offset: u16, more: bool, dont: bool) -> Self {
        if let Some(Layer::Ipv4 {
            frag_offset,
            more_frags,
            dont_frag,
            ..
        }) = self.layers.last_mut()
        {
            *frag_offset = offset & 0x1fff;
            *more_frags = more;
            *dont_frag = dont;
        }
        self
    }

    /// Sets the options of the last IPv4 layer (zero-padded to a multiple of 4 bytes).
    pub fn ipv4_options(mut self, value: &[u8]) -> Self {
        if let Some(Layer::Ipv4 { options, .. }) = self.layers.last_mut() {
            *options = value.to_vec();
        }
        self
    }

    /// Sets the flags (the 12 bits after the data offset) of the last TCP layer.
    pub fn tcp_flags(mut self, value: u16) -> Self {
        if let Some(Layer::Tcp { flags, .. }) = self.layers.last_mut() {
            *flags = value & 0x0fff;
        }
        self
    }

    /// Sets sequence and acknowledgment numbers of the last TCP layer.
    pub fn tcp_seq(mut self, seq_number: u32, ack_number: u32) -> Self {
        if let Some(Layer::Tcp { seq, ack, .. }) = self.layers.last_mut() {
            *seq = seq_number;
            *ack = ack_number;
        }
        self
    }

    /// Sets the options of the last TCP layer (zero-padded to a multiple of 4 bytes, at most
    /// 40).
    pub fn tcp_options(mut self, value: &[u8]) -> Self {
        if let Some(Layer::Tcp { options, .. }) = self.layers.last_mut() {
            *options = value.iter().copied().take(40).collect();
        }
        self
    }

    /// Serializes the packet.
    pub fn build(&self) -> Vec<u8> {
        let mut out = self.payload.clone();
        for i in (0..self.layers.len()).rev() {
            let next = self.layers.get(i + 1);
            let ip = self.layers[..i]
                .iter()
                .rev()
                .find(|l| matches!(l, Layer::Ipv4 { .. } | Layer::Ipv6 { .. }));
            let mut hdr = emit_layer(&self.layers[i], next, ip, &out);
            hdr.extend_from_slice(&out);
            out = hdr;
        }
        out
    }
}

/// Converts a length to a 16-bit field, saturating (only absurd test inputs saturate).
fn len16(len: usize) -> u16 {
    u16::try_from(len).unwrap_or(u16::MAX)
}

/// Pads `v` with zeros to a multiple of `n` bytes.
fn pad_to(v: &mut Vec<u8>, n: usize) {
    while v.len() % n != 0 {
        v.push(0);
    }
}

/// Pseudo-header sum of the enclosing IP header for an upper-layer packet of `len` bytes.
fn pseudo(ip: Option<&Layer>, protocol: u8, len: usize) -> u64 {
    match ip {
        Some(Layer::Ipv4 { src, dst, .. }) => {
            checksum::pseudo_header_v4(*src, *dst, protocol, len16(len))
        }
        Some(Layer::Ipv6 { src, dst, .. }) => {
            checksum::pseudo_header_v6(*src, *dst, protocol, u32::try_from(len).unwrap_or(u32::MAX))
        }
        _ => 0,
    }
}

/// Emits the header of `layer`, given the bytes `inner` that follow it.
fn emit_layer(layer: &Layer, next: Option<&Layer>, ip: Option<&Layer>, inner: &[u8]) -> Vec<u8> {
    let next_type = next.and_then(Layer::ethertype);
    let next_proto = next.and_then(Layer::protocol);
    let mut h = Vec::with_capacity(64);
    match layer {
        Layer::Ethernet {
            src,
            dst,
            ethertype,
        } => {
            h.extend_from_slice(dst);
            h.extend_from_slice(src);
            let ty = match next {
                Some(Layer::Llc { .. } | Layer::LlcSnap { .. }) => len16(inner.len()),
                _ => ethertype.or(next_type).unwrap_or(DEFAULT_ETHERTYPE),
            };
            h.extend_from_slice(&ty.to_be_bytes());
        }
        Layer::Vlan { tci, ethertype, .. } => {
            h.extend_from_slice(&tci.to_be_bytes());
            let ty = ethertype.or(next_type).unwrap_or(DEFAULT_ETHERTYPE);
            h.extend_from_slice(&ty.to_be_bytes());
        }
        Layer::Llc {
            dsap,
            ssap,
            control,
        } => h.extend_from_slice(&[*dsap, *ssap, *control]),
        Layer::LlcSnap { ethertype } => {
            h.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0]);
            let ty = ethertype.or(next_type).unwrap_or(DEFAULT_ETHERTYPE);
            h.extend_from_slice(&ty.to_be_bytes());
        }
        Layer::Mpls { label, tc, ttl } => {
            let bos = u32::from(!matches!(next, Some(Layer::Mpls { .. })));
            let lse = ((label & 0xf_ffff) << 12)
                | (u32::from(tc & 7) << 9)
                | (bos << 8)
                | u32::from(*ttl);
            h.extend_from_slice(&lse.to_be_bytes());
        }
        Layer::Arp {
            op,
            sha,
            spa,
            tha,
            tpa,
            ..
        } => {
            h.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4]);
            h.extend_from_slice(&op.to_be_bytes());
            h.extend_from_slice(sha);
            h.extend_from_slice(&spa.octets());
            h.extend_from_slice(tha);
            h.extend_from_slice(&tpa.octets());
        }
        Layer::Ipv4 {
            src,
            dst,
            tos,
            ttl,
            ident,
            dont_frag,
            more_frags,
            frag_offset,
            options,
            protocol,
        } => {
            let mut opts = options.clone();
            pad_to(&mut opts, 4);
            opts.truncate(40);
            let hlen = 20 + opts.len();
            // `hlen` is at most 60, so `hlen / 4` fits in the IHL nibble.
            let ihl = u8::try_from(hlen / 4).unwrap_or(15);
            h.push(0x40 | ihl);
            h.push(*tos);
            h.extend_from_slice(&len16(hlen + inner.len()).to_be_bytes());
            h.extend_from_slice(&ident.to_be_bytes());
            let frag = (u16::from(*dont_frag) << 14) | (u16::from(*more_frags) << 13) | frag_offset;
            h.extend_from_slice(&frag.to_be_bytes());
            h.push(*ttl);
            h.push(protocol.or(next_proto).unwrap_or(253));
            h.extend_from_slice(&[0, 0]);
            h.extend_from_slice(&src.octets());
            h.extend_from_slice(&dst.octets());
            h.extend_from_slice(&opts);
            let c = checksum::checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
        }
        Layer::Ipv6 {
            src,
            dst,
            traffic_class,
            flow_label,
            hop_limit,
            protocol,
        } => {
            let w = (6u32 << 28) | (u32::from(*traffic_class) << 20) | (flow_label & 0xf_ffff);
            h.extend_from_slice(&w.to_be_bytes());
            h.extend_from_slice(&len16(inner.len()).to_be_bytes());
            h.push(protocol.or(next_proto).unwrap_or(59));
            h.push(*hop_limit);
            h.extend_from_slice(&src.octets());
            h.extend_from_slice(&dst.octets());
        }
        Layer::Ipv6Ext {
            kind,
            body,
            protocol,
        } => {
            h.push(protocol.or(next_proto).unwrap_or(59));
            h.push(0);
            h.extend_from_slice(body);
            if *kind == Ipv6ExtKind::Authentication {
                pad_to(&mut h, 8);
                // RFC 4302 § 2.2: length in 4-byte units, minus 2.
                h[1] = u8::try_from(h.len() / 4 - 2).unwrap_or(u8::MAX);
            } else {
                pad_to(&mut h, 8);
                // RFC 8200 § 4.3: length in 8-byte units, not counting the first 8.
                h[1] = u8::try_from(h.len() / 8 - 1).unwrap_or(u8::MAX);
            }
        }
        Layer::Ipv6Frag {
            offset,
            more,
            ident,
            protocol,
        } => {
            h.push(protocol.or(next_proto).unwrap_or(59));
            h.push(0);
            let w = ((offset & 0x1fff) << 3) | u16::from(*more);
            h.extend_from_slice(&w.to_be_bytes());
            h.extend_from_slice(&ident.to_be_bytes());
        }
        Layer::Tcp {
            src,
            dst,
            seq,
            ack,
            flags,
            window,
            options,
        } => {
            let mut opts = options.clone();
            pad_to(&mut opts, 4);
            let hlen = 20 + opts.len();
            let off = u16::try_from(hlen / 4).unwrap_or(15);
            h.extend_from_slice(&src.to_be_bytes());
            h.extend_from_slice(&dst.to_be_bytes());
            h.extend_from_slice(&seq.to_be_bytes());
            h.extend_from_slice(&ack.to_be_bytes());
            h.extend_from_slice(&((off << 12) | (flags & 0x0fff)).to_be_bytes());
            h.extend_from_slice(&window.to_be_bytes());
            h.extend_from_slice(&[0, 0, 0, 0]);
            h.extend_from_slice(&opts);
            let len = h.len() + inner.len();
            let c = checksum::finish(pseudo(ip, 6, len) + checksum::sum(&h) + checksum::sum(inner));
            h[16..18].copy_from_slice(&c.to_be_bytes());
        }
        Layer::Udp { src, dst } => {
            let len = 8 + inner.len();
            h.extend_from_slice(&src.to_be_bytes());
            h.extend_from_slice(&dst.to_be_bytes());
            h.extend_from_slice(&len16(len).to_be_bytes());
            h.extend_from_slice(&[0, 0]);
            let mut c =
                checksum::finish(pseudo(ip, 17, len) + checksum::sum(&h) + checksum::sum(inner));
            // RFC 768: a computed zero is sent as all ones.
            if c == 0 {
                c = 0xffff;
            }
            h[6..8].copy_from_slice(&c.to_be_bytes());
        }
        Layer::Sctp { src, dst, vtag } => {
            h.extend_from_slice(&src.to_be_bytes());
            h.extend_from_slice(&dst.to_be_bytes());
            h.extend_from_slice(&vtag.to_be_bytes());
            h.extend_from_slice(&[0, 0, 0, 0]);
            let mut all = h.clone();
            all.extend_from_slice(inner);
            let c = checksum::crc32c(&all);
            h[8..12].copy_from_slice(&c.to_le_bytes());
        }
        Layer::Icmpv4 { ty, code, rest } => {
            h.extend_from_slice(&[*ty, *code, 0, 0]);
            h.extend_from_slice(rest);
            let c = checksum::finish(checksum::sum(&h) + checksum::sum(inner));
            h[2..4].copy_from_slice(&c.to_be_bytes());
        }
        Layer::Icmpv6 { ty, code, body } => {
            h.extend_from_slice(&[*ty, *code, 0, 0]);
            h.extend_from_slice(body);
            let len = h.len() + inner.len();
            let c =
                checksum::finish(pseudo(ip, 58, len) + checksum::sum(&h) + checksum::sum(inner));
            h[2..4].copy_from_slice(&c.to_be_bytes());
        }
        Layer::Vxlan { vni } => {
            h.extend_from_slice(&[0x08, 0, 0, 0]);
            h.extend_from_slice(&(vni << 8).to_be_bytes());
        }
        Layer::Geneve {
            vni,
            protocol,
            options,
        } => {
            let mut opts = options.clone();
            pad_to(&mut opts, 4);
            let opt_words = u8::try_from(opts.len() / 4).unwrap_or(63) & 0x3f;
            h.push(opt_words);
            h.push(0);
            h.extend_from_slice(&protocol.to_be_bytes());
            h.extend_from_slice(&(vni << 8).to_be_bytes());
            h.extend_from_slice(&opts);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    #[test]
    fn build_tcp_ipv4_lengths_and_checksums() {
        let p = PacketBuilder::ethernet(A, B)
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
            .tcp(1, 2)
            .payload(b"abc")
            .build();
        assert_eq!(p.len(), 14 + 20 + 20 + 3);
        assert_eq!(&p[0..6], &B);
        assert_eq!(&p[12..14], &[0x08, 0x00]);
        assert_eq!(u16::from_be_bytes([p[16], p[17]]), 43);
        assert!(checksum::verify(checksum::sum(&p[14..34])));
        let ps = checksum::pseudo_header_v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), 6, 23);
        assert!(checksum::verify(ps + checksum::sum(&p[34..])));
    }

    #[test]
    fn build_udp_ipv6_checksum_verifies() {
        let src = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
        let dst = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);
        let p = PacketBuilder::ethernet(A, B)
            .ipv6(src, dst)
            .udp(7, 9)
            .payload(&[1, 2, 3])
            .build();
        assert_eq!(u16::from_be_bytes([p[18], p[19]]), 11);
        assert_eq!(p[20], 17);
        let ps = checksum::pseudo_header_v6(src, dst, 17, 11);
        assert!(checksum::verify(ps + checksum::sum(&p[54..])));
    }

    #[test]
    fn build_mpls_sets_bottom_of_stack_on_last() {
        let p = PacketBuilder::ethernet(A, B)
            .mpls(100, 1, 64)
            .mpls(200, 0, 63)
            .build();
        assert_eq!(&p[12..14], &[0x88, 0x47]);
        assert_eq!(p[16] & 1, 0);
        assert_eq!(p[20] & 1, 1);
        assert_eq!(u32::from_be_bytes([p[18], p[19], p[20], p[21]]) >> 12, 200);
    }

    #[test]
    fn build_llc_snap_length_field() {
        let p = PacketBuilder::ethernet(A, B)
            .llc_snap()
            .ipv4([1, 1, 1, 1], [2, 2, 2, 2])
            .build();
        assert_eq!(u16::from_be_bytes([p[12], p[13]]), 28);
        assert_eq!(&p[14..22], &[0xaa, 0xaa, 3, 0, 0, 0, 8, 0]);
    }

    #[test]
    fn build_ipv6_ext_headers_chain() {
        let p = PacketBuilder::ethernet(A, B)
            .ipv6([0u16; 8], [0u16; 8])
            .ipv6_ext(Ipv6ExtKind::HopByHop, &[])
            .ipv6_ext(
                Ipv6ExtKind::Routing,
                &[0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            )
            .ipv6_fragment(0, true, 7)
            .ipv6_ext(Ipv6ExtKind::Authentication, &[0; 10])
            .udp(1, 2)
            .build();
        assert_eq!(p[20], 0);
        assert_eq!(p[54], 43);
        assert_eq!(p[62], 44);
        assert_eq!(p[63], 1);
        assert_eq!(p[78], 51);
        assert_eq!(p[86], 17);
        assert_eq!(p[87], 2);
        assert_eq!(p.len(), 54 + 8 + 16 + 8 + 16 + 8);
    }

    #[test]
    fn build_sctp_crc32c_verifies() {
        let p = PacketBuilder::new()
            .ipv4([1, 1, 1, 1], [2, 2, 2, 2])
            .sctp(1, 2, 0xdead_beef)
            .payload(&[0; 16])
            .build();
        let mut sctp = p[20..].to_vec();
        let stored = u32::from_le_bytes([sctp[8], sctp[9], sctp[10], sctp[11]]);
        sctp[8..12].fill(0);
        assert_eq!(checksum::crc32c(&sctp), stored);
    }

    #[test]
    fn build_geneve_options_length() {
        let p = PacketBuilder::new()
            .geneve(5, &[0x01, 0x02, 0x80, 0x01, 1, 2, 3, 4])
            .ethernet_inner(A, B)
            .build();
        assert_eq!(p[0], 2);
        assert_eq!(&p[2..4], &[0x65, 0x58]);
        assert_eq!(&p[4..8], &[0, 0, 5, 0]);
        assert_eq!(p.len(), 8 + 8 + 14);
    }

    #[test]
    fn build_vxlan_stack_parses_through_wire_views() {
        use crate::wire::{arp, ethernet, ipv4, udp, vlan, vxlan, ChecksumCaps};
        let caps = ChecksumCaps::default();
        let p = PacketBuilder::ethernet(A, B)
            .vlan(10, 3)
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
            .udp(5000, udp::VXLAN_PORT)
            .vxlan(42)
            .ethernet_inner(B, A)
            .arp_request(B, [192, 168, 0, 1], [192, 168, 0, 2])
            .build();
        let eth = ethernet::Frame::new_checked(&p[..]).expect("ethernet");
        assert_eq!(eth.ethertype(), ethernet::EtherType::Vlan);
        let tag = vlan::Tag::new_checked(eth.payload()).expect("vlan");
        assert_eq!((tag.vid(), tag.pcp()), (10, 3));
        let ip = ipv4::Packet::new_checked(tag.payload()).expect("ipv4");
        let ip_repr = ipv4::Repr::parse(&ip, &caps).expect("ipv4 checksum");
        let (s, d) = (ip_repr.src_addr.into(), ip_repr.dst_addr.into());
        let u = udp::Packet::new_checked(ip.payload()).expect("udp");
        let u_repr = udp::Repr::parse(&u, &s, &d, &caps).expect("udp checksum");
        assert_eq!(u_repr.dst_port, udp::VXLAN_PORT);
        let vx = vxlan::Packet::new_checked(u.payload()).expect("vxlan");
        assert_eq!(vxlan::Repr::parse(&vx).map(|r| r.vni), Ok(42));
        let inner = ethernet::Frame::new_checked(vx.payload()).expect("inner");
        assert_eq!(inner.ethertype(), ethernet::EtherType::Arp);
        let a = arp::Repr::parse(&arp::Packet::new_checked(inner.payload()).expect("arp"))
            .expect("arp repr");
        assert_eq!(a.operation, arp::Operation::Request);
    }

    #[test]
    fn build_l4_checksums_verify_through_wire_views() {
        use crate::wire::{icmpv4, icmpv6, ipv4, ipv6, sctp, tcp, ChecksumCaps};
        let caps = ChecksumCaps::default();
        let v6 = |x: u16| Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, x);
        let p = PacketBuilder::new()
            .ipv6(v6(1), v6(2))
            .tcp(1, 2)
            .payload(b"odd")
            .build();
        let ip = ipv6::Packet::new_checked(&p[..]).expect("ipv6");
        let t = tcp::Packet::new_checked(ip.payload()).expect("tcp");
        assert!(tcp::Repr::parse(&t, &v6(1).into(), &v6(2).into(), &caps).is_ok());

        let p = PacketBuilder::new()
            .ipv6(v6(1), v6(2))
            .icmpv6_na(0x60, v6(1), Some(A))
            .build();
        let ip = ipv6::Packet::new_checked(&p[..]).expect("ipv6");
        let i = icmpv6::Packet::new_checked(ip.payload()).expect("icmpv6");
        assert!(icmpv6::Repr::parse(&i, &v6(1), &v6(2), &caps).is_ok());
        assert!(icmpv6::NdRepr::parse(&i).is_ok());

        let p = PacketBuilder::new()
            .ipv4([1, 1, 1, 1], [2, 2, 2, 2])
            .icmpv4_echo_request(7, 8)
            .payload(b"ping")
            .build();
        let ip = ipv4::Packet::new_checked(&p[..]).expect("ipv4");
        let i = icmpv4::Packet::new_checked(ip.payload()).expect("icmpv4");
        assert_eq!(icmpv4::Repr::parse(&i, &caps).map(|r| r.data_len), Ok(4));

        let p = PacketBuilder::new()
            .ipv4([1, 1, 1, 1], [2, 2, 2, 2])
            .sctp(1, 2, 3)
            .payload(&[0; 8])
            .build();
        let ip = ipv4::Packet::new_checked(&p[..]).expect("ipv4");
        let sc = sctp::Packet::new_checked(ip.payload()).expect("sctp");
        assert!(sctp::Repr::parse(&sc, &caps).is_ok());
    }
}
