# ran-config/: the ZMQ broker between one srsenb and N srsue (the srsran-zmq lab with several UEs).
BROKER_SRC := ran-config/broker/zmq_broker.c ran-config/broker/uplink.c ran-config/broker/control.c ran-config/broker/clock.c
$(BIN)/cellab-zmq-broker: $(BROKER_SRC) ran-config/broker/broker.h ran-config/rules.mk
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS_COMMON) -o $@ $(BROKER_SRC) $$(pkg-config --cflags --libs libzmq) -lpthread -lm

BUILD_TARGETS += $(BIN)/cellab-zmq-broker
