# The default target, address-controller, holds both binaries (/manager
# and /metallb-iad): the charts' one image, each running its binary by path.
# --target metallb-iad builds the driver's own image, /metallb-iad alone,
# which serves the driver chart as well. Static (CGO off), stripped, and run
# as the distroless non-root user.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY policies/ policies/
ARG TARGETOS=linux TARGETARCH=amd64
ENV CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH}
RUN go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager && \
    go build -trimpath -ldflags="-s -w" -o /out/metallb-iad ./cmd/metallb-iad

FROM gcr.io/distroless/static:nonroot AS metallb-iad
COPY --from=build /out/metallb-iad /
USER 65532:65532
ENTRYPOINT ["/metallb-iad"]

FROM gcr.io/distroless/static:nonroot AS address-controller
COPY --from=build /out/manager /out/metallb-iad /
USER 65532:65532
ENTRYPOINT ["/manager"]
